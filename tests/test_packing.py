"""Packing: rows within max_length, and packed batches whose loss, gradients and logits are
those of the same examples padded one a row (tiny random Llama, Qwen2, Gemma 3 and GPT-2,
float32; GPT-2's learned positions show that each example starts again at position 0)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch
import transformers as T
from tiny_models import VOCAB, tiny_config
from torch import nn
from transformers.modeling_flash_attention_utils import (
    _is_packed_sequence,
    prepare_fa_kwargs_from_position_ids,
)

from adaptlab.data.encoding import IGNORE_INDEX
from adaptlab.engine.lm_head_capture import lm_head_input
from adaptlab.engine.lm_loss import next_token_loss
from adaptlab.engine.packing import collate_packed, collate_padded, pack, target_tokens
from adaptlab.engine.packing_attention import packing_attention
from adaptlab.errors import ConfigError, DataError

PAD = 0
MODELS = [
    ("llama", "sdpa"),
    ("llama", "eager"),
    ("qwen2", "sdpa"),
    ("qwen2", "eager"),
    ("gemma3", "sdpa"),
    ("gemma3", "eager"),
    ("gpt2", "sdpa"),
    ("gpt2", "eager"),
]


@dataclass(frozen=True)
class Example:
    input_ids: tuple[int, ...]
    labels: tuple[int, ...]


def examples(seed: int = 0, count: int = 7, shortest: int = 3, longest: int = 12) -> list[Example]:
    """Random examples, each a prompt (no targets) then an answer (targets)."""
    generator = torch.Generator().manual_seed(seed)
    made = []
    for _ in range(count):
        length = int(torch.randint(shortest, longest + 1, (1,), generator=generator))
        prompt = int(torch.randint(0, length - 1, (1,), generator=generator))
        ids = tuple(torch.randint(1, VOCAB, (length,), generator=generator).tolist())
        made.append(Example(ids, (IGNORE_INDEX,) * prompt + ids[prompt:]))
    return made


def causal_lm(arch: str, attention: str, sliding_window: int = 64) -> nn.Module:
    """A tiny random causal LM; Qwen2 and Gemma 3 with a sliding-window layer beside a full one
    (each builds a mask per layer type), GPT-2 with learned absolute positions."""
    torch.manual_seed(0)
    common = dict(
        vocab_size=VOCAB,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=64,
        pad_token_id=PAD,
    )
    if arch == "llama":
        config = tiny_config("llama")
    elif arch == "gpt2":
        config = T.GPT2Config(
            vocab_size=VOCAB,
            n_embd=32,
            n_layer=2,
            n_head=4,
            n_positions=64,
            bos_token_id=1,
            eos_token_id=1,
            pad_token_id=PAD,
        )
    elif arch == "qwen2":
        config = T.Qwen2Config(
            **common, use_sliding_window=True, sliding_window=sliding_window, max_window_layers=1
        )
    else:
        layers = ["sliding_attention", "full_attention"]
        config = T.Gemma3TextConfig(
            **common, head_dim=8, sliding_window=sliding_window, layer_types=layers
        )
    return T.AutoModelForCausalLM.from_config(config, attn_implementation=attention).eval()


def packed_rows(made: list[Example], max_length: int) -> list[list[Example]]:
    rows = pack([len(e.input_ids) for e in made], max_length)
    return [[made[i] for i in row] for row in rows]


def model_inputs(batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {key: value for key, value in batch.items() if key != "labels"}


def loss_and_grads(
    model: nn.Module, batch: dict[str, torch.Tensor]
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Mean next-token loss over the target tokens, and every parameter's gradient."""
    model.zero_grad()
    scores = next_token_loss(lm_head_input(model, **model_inputs(batch)), batch["labels"])
    loss = scores.mean()
    loss.backward()
    grads = {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}
    return loss.detach(), grads


def assert_close(actual: torch.Tensor, expected: torch.Tensor) -> None:
    """Equal within 1e-5 relative to the tensor's largest value."""
    scale = float(expected.abs().max())
    torch.testing.assert_close(actual, expected, rtol=1e-5, atol=1e-5 * scale)


def one_line(error: pytest.ExceptionInfo[Exception]) -> str:
    message = str(error.value)
    assert "\n" not in message
    return message


# pack


def test_pack_keeps_rows_within_max_length_and_each_example_once() -> None:
    lengths = [int(n) for n in torch.randint(10, 41, (300,), generator=torch.Generator())]
    rows = pack(lengths, 512)
    assert sorted(i for row in rows for i in row) == list(range(300))
    assert all(sum(lengths[i] for i in row) <= 512 for row in rows)
    assert all(row == sorted(row) for row in rows)
    assert len(rows) <= -(-sum(lengths) // 512) + 1  # at most one row above the fewest possible
    assert pack(lengths, 512) == rows


def test_pack_fills_rows_exactly_when_the_lengths_allow() -> None:
    lengths = [6, 4, 5, 5, 3, 7, 2, 8]
    rows = pack(lengths, 10)
    assert [sum(lengths[i] for i in row) for row in rows] == [10, 10, 10, 10]


def test_pack_puts_each_example_in_the_row_it_fills_best() -> None:
    # 8 and 6 open rows (2 and 4 left), 3 joins 6 (1 left); 1 then fills that row exactly,
    # where first fit would put it into the first row with room, beside 8
    assert pack([1, 8, 3, 6], 10) == [[1], [0, 2, 3]]


def test_pack_is_reproducible_with_ties() -> None:
    assert pack([5] * 5, 10) == [[0, 1], [2, 3], [4]]
    assert pack([], 10) == []
    assert pack([10, 10], 10) == [[0], [1]]


@pytest.mark.parametrize(
    ("lengths", "needle"),
    [([3, 4, 13], "example 2 has 13 tokens"), ([3, 0], "example 1 has 0 tokens")],
)
def test_pack_refuses_an_example_it_cannot_place(lengths: list[int], needle: str) -> None:
    with pytest.raises(DataError) as error:
        pack(lengths, 12)
    assert needle in one_line(error) and "max_length 12" in str(error.value)


def test_pack_refuses_a_max_length_below_one() -> None:
    with pytest.raises(ConfigError) as error:
        pack([1], 0)
    assert "max_length" in one_line(error)


# batches


def test_collate_padded_pads_on_the_right() -> None:
    a, b = Example((5, 6, 7), (IGNORE_INDEX, 6, 7)), Example((8,), (8,))
    batch = collate_padded([a, b], PAD)
    assert batch["input_ids"].tolist() == [[5, 6, 7], [8, PAD, PAD]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1], [1, 0, 0]]
    assert batch["labels"].tolist() == [[IGNORE_INDEX, 6, 7], [8, IGNORE_INDEX, IGNORE_INDEX]]


def test_collate_packed_restarts_positions_and_hides_other_examples() -> None:
    a, b, c = Example((5, 6), (5, 6)), Example((7, 8, 9), (IGNORE_INDEX, 8, 9)), Example((4,), (4,))
    batch = collate_packed([[a, b], [c]], PAD, "sdpa")
    assert batch["input_ids"].tolist() == [[5, 6, 7, 8, 9], [4, PAD, PAD, PAD, PAD]]
    ignored = [IGNORE_INDEX] * 4
    assert batch["labels"].tolist() == [
        [IGNORE_INDEX, 6, IGNORE_INDEX, 8, 9],
        [IGNORE_INDEX, *ignored],
    ]
    assert batch["position_ids"].tolist() == [[0, 1, 0, 1, 2], [0, 0, 1, 2, 3]]
    mask = batch["attention_mask"]
    assert mask.dtype == torch.bool and mask.shape == (2, 1, 5, 5)
    assert mask[0, 0].int().tolist() == [
        [1, 0, 0, 0, 0],
        [1, 1, 0, 0, 0],
        [0, 0, 1, 0, 0],
        [0, 0, 1, 1, 0],
        [0, 0, 1, 1, 1],
    ]
    assert mask[1, 0].int().tolist() == [  # the padding sees only itself, and no row is empty
        [1, 0, 0, 0, 0],
        [0, 1, 0, 0, 0],
        [0, 1, 1, 0, 0],
        [0, 1, 1, 1, 0],
        [0, 1, 1, 1, 1],
    ]


def test_collate_packed_gives_eager_attention_an_additive_mask() -> None:
    a, b = Example((5, 6), (5, 6)), Example((7,), (7,))
    sdpa = collate_packed([[a, b]], PAD, "sdpa")["attention_mask"]
    eager = collate_packed([[a, b]], PAD, "eager")["attention_mask"]
    assert eager.dtype == torch.float32
    assert torch.equal(eager == 0, sdpa)
    assert torch.all(eager[~sdpa] == torch.finfo(torch.float32).min)


def test_collate_packed_joins_rows_into_one_for_flash_attention() -> None:
    made = examples(count=5)
    rows = packed_rows(made, 24)
    batch = collate_packed(rows, PAD, "flash_attention_2")
    lengths = [len(e.input_ids) for row in rows for e in row]
    assert set(batch) == {"input_ids", "labels", "position_ids"}
    assert batch["input_ids"].shape == (1, sum(lengths))
    assert _is_packed_sequence(batch["position_ids"], batch_size=1)
    (starts, _), (longest, _) = prepare_fa_kwargs_from_position_ids(batch["position_ids"])
    assert starts.tolist() == torch.tensor([0, *lengths]).cumsum(0).tolist()
    assert int(longest) == max(lengths)
    padded = collate_padded([e for row in rows for e in row], PAD)
    assert target_tokens(batch) == target_tokens(padded)


@pytest.mark.parametrize("attention", ["flex_attention", "paged|sdpa"])
def test_collate_packed_refuses_other_attention(attention: str) -> None:
    with pytest.raises(ConfigError) as error:
        collate_packed([[Example((1,), (1,))]], PAD, attention)
    assert repr(attention) in one_line(error) and "sdpa" in str(error.value)


@pytest.mark.parametrize(
    ("rows", "needle"),
    [
        ([], "at least one example"),
        ([[Example((1,), (1,))], []], "at least one example"),
        ([[Example((1, 2), (1,))]], "2 token ids and 1 labels"),
        ([[Example((), ())]], "0 token ids"),
    ],
)
def test_collates_refuse_malformed_batches(rows: list[list[Example]], needle: str) -> None:
    with pytest.raises(DataError) as error:
        collate_packed(rows, PAD, "sdpa")
    assert needle in one_line(error)
    if all(rows):  # no empty row: the same examples padded one a row are refused too
        with pytest.raises(DataError) as error:
            collate_padded([e for row in rows for e in row], PAD)
        assert needle in one_line(error)


def test_target_tokens_counts_what_the_loss_is_the_mean_over() -> None:
    model = causal_lm("llama", "sdpa")
    made = examples(seed=3)
    packed = collate_packed(packed_rows(made, 24), PAD, "sdpa")
    scores = next_token_loss(lm_head_input(model, **model_inputs(packed)), packed["labels"])
    expected = sum(sum(t != IGNORE_INDEX for t in e.labels[1:]) for e in made)
    assert target_tokens(packed) == int(scores.count) == expected
    assert target_tokens(collate_padded(made, PAD)) == expected


# the model sees what it sees unpacked


@pytest.mark.parametrize(("arch", "attention"), MODELS)
def test_packed_loss_and_gradients_equal_the_padded_batch(arch: str, attention: str) -> None:
    model = causal_lm(arch, attention)
    made = examples(seed=1)
    rows = packed_rows(made, 24)
    assert len(rows) < len(made) and any(len(row) > 1 for row in rows)
    padded_loss, padded_grads = loss_and_grads(model, collate_padded(made, PAD))
    packed_loss, packed_grads = loss_and_grads(model, collate_packed(rows, PAD, attention))
    assert_close(packed_loss, padded_loss)
    assert packed_grads.keys() == padded_grads.keys() and padded_grads
    for name, grad in padded_grads.items():
        assert_close(packed_grads[name], grad)


@pytest.mark.parametrize(("arch", "attention"), MODELS)
@torch.no_grad()
def test_each_packed_example_has_the_logits_it_has_alone(arch: str, attention: str) -> None:
    model = causal_lm(arch, attention)
    rows = packed_rows(examples(seed=2), 24)
    logits = model(**model_inputs(collate_packed(rows, PAD, attention))).logits
    for number, row in enumerate(rows):
        start = 0
        for example in row:
            alone = model(input_ids=torch.tensor([example.input_ids])).logits[0]
            assert_close(logits[number, start : start + len(alone)], alone)
            start += len(alone)


@torch.no_grad()
def test_the_model_reads_the_block_mask() -> None:
    model = causal_lm("llama", "sdpa")
    a, b = Example((5, 6, 7), (5, 6, 7)), Example((8, 9), (8, 9))
    batch = model_inputs(collate_packed([[a, b]], PAD, "sdpa"))
    separate = model(**batch).logits[0, 3:]
    batch["attention_mask"] = torch.ones(5, 5, dtype=torch.bool).tril()[None, None]
    across = model(**batch).logits[0, 3:]
    assert not torch.allclose(separate, across, atol=1e-4)


# which models can be packed


@pytest.mark.parametrize("attention", ["sdpa", "eager"])
def test_packing_attention_names_the_models_implementation(attention: str) -> None:
    assert packing_attention(causal_lm("gemma3", attention, sliding_window=64), 64) == attention


@pytest.mark.parametrize("arch", ["qwen2", "gemma3"])
def test_packing_attention_refuses_a_window_shorter_than_max_length(arch: str) -> None:
    model = causal_lm(arch, "sdpa", sliding_window=16)
    with pytest.raises(ConfigError) as error:
        packing_attention(model, 32)
    message = one_line(error)
    assert "16-token sliding window" in message and "max_length 32" in message


def test_packing_attention_ignores_a_window_no_layer_uses() -> None:
    config = T.Qwen2Config(
        vocab_size=VOCAB,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=4,
        intermediate_size=64,
        sliding_window=4,
    )
    model = T.AutoModelForCausalLM.from_config(config, attn_implementation="sdpa")
    assert packing_attention(model, 512) == "sdpa"


def test_packing_attention_refuses_flex_attention() -> None:
    model = causal_lm("llama", "sdpa")
    model.config._attn_implementation = "flex_attention"
    with pytest.raises(ConfigError) as error:
        packing_attention(model, 32)
    assert "'flex_attention'" in one_line(error)
