"""The chunked LM losses (`adaptlab.engine.lm_loss`): loss and gradients equal to the plain
computation on the full logits, over several chunks, with ignored positions, in float32, bf16
and under autocast; causal, masked and kd-logit through tiny models; no tensor of
(positions x vocabulary) elements ever made; models that change their logits refused."""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.nn.functional as F
import transformers as T
from tiny_models import tiny_config, tiny_model
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from adaptlab.continual.corpus_run import TextStage, TextStageRun, collate
from adaptlab.continual.distillation import (
    LogitDistillationConfig,
    TextLogitDistillation,
    merged_kl,
)
from adaptlab.data.encoding import IGNORE_INDEX
from adaptlab.engine.lm_head_capture import lm_head_input
from adaptlab.engine.lm_loss import (
    causal_lm_loss,
    chunk_rows,
    linear_cross_entropy,
    linear_log_probs_at,
    linear_top_k,
)
from adaptlab.errors import ConfigError
from adaptlab.runs.mlm_objective import masked_lm_loss

N, H, V, CHUNK = 64, 16, 50, 16
"""Positions, hidden size, vocabulary; CHUNK positions a chunk (4 chunks, so N*V > V*H)."""
TOLERANCE = {
    torch.float32: {"rtol": 1e-5, "atol": 1e-5},
    torch.bfloat16: {"rtol": 2e-2, "atol": 2e-2},
}
TIE = {torch.float32: 1e-4, torch.bfloat16: 1.25e-1}
"""Top-two logit gaps below which another CPU's rounding may pick the other word (bf16: two
units in the last place of logits between 8 and 16)."""


class LargestTensor(TorchDispatchMode):
    """Records the largest number of elements of any tensor an operation returns."""

    largest = 0

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        for value in tree_flatten(out)[0]:
            if isinstance(value, torch.Tensor):
                self.largest = max(self.largest, value.numel())
        return out


def head_tensors(
    dtype: torch.dtype = torch.float32, bias: bool = True, seed: int = 0
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None, torch.Tensor]:
    """Hidden states, weight and bias (all requiring grad) and targets, a fifth ignored."""
    generator = torch.Generator().manual_seed(seed)
    hidden = torch.randn(N, H, generator=generator).to(dtype).requires_grad_()
    weight = (torch.randn(V, H, generator=generator) / 2).to(dtype).requires_grad_()
    shift = (torch.randn(V, generator=generator) / 2).to(dtype).requires_grad_() if bias else None
    targets = torch.randint(V, (N,), generator=generator)
    targets[torch.rand(N, generator=generator) < 0.2] = IGNORE_INDEX
    return hidden, weight, shift, targets


def grads(loss: torch.Tensor, *tensors: torch.Tensor | None) -> list[torch.Tensor]:
    present = [t for t in tensors if t is not None]
    return list(torch.autograd.grad(loss, present))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("bias", [True, False])
def test_cross_entropy_and_its_gradients_equal_the_plain_computation(dtype, bias):
    hidden, weight, shift, targets = head_tensors(dtype, bias)
    logits = F.linear(hidden, weight, shift).float()
    plain = F.cross_entropy(logits, targets, ignore_index=IGNORE_INDEX)
    chunked = linear_cross_entropy(hidden, weight, shift, targets, chunk_size=CHUNK)
    torch.testing.assert_close(chunked.mean(), plain, **TOLERANCE[dtype])
    kept = targets != IGNORE_INDEX
    assert int(chunked.count) == int(kept.sum())
    right = int((logits.argmax(-1) == targets)[kept].sum())
    top2 = logits.topk(2, dim=-1).values
    near_ties = int(((top2[:, 0] - top2[:, 1] < TIE[dtype]) & kept).sum())  # rounding may flip
    assert abs(int(chunked.correct) - right) <= near_ties  # exact in float32 here: no near-tie
    assert dtype == torch.bfloat16 or near_ties == 0
    for got, expected in zip(
        grads(chunked.mean(), hidden, weight, shift),
        grads(plain, hidden, weight, shift),
        strict=True,
    ):
        assert got.dtype == dtype
        torch.testing.assert_close(got, expected, **TOLERANCE[dtype])


def test_the_sum_for_perplexity_and_a_frozen_weight() -> None:
    hidden, weight, shift, targets = head_tensors()
    weight.requires_grad_(False)
    plain = F.cross_entropy(F.linear(hidden, weight, shift), targets, reduction="sum")
    chunked = linear_cross_entropy(hidden, weight, shift, targets, chunk_size=CHUNK).total
    torch.testing.assert_close(chunked, plain)
    for got, expected in zip(
        grads(chunked * 3, hidden, shift), grads(plain * 3, hidden, shift), strict=True
    ):
        torch.testing.assert_close(got, expected)
    with torch.no_grad():
        assert not linear_cross_entropy(hidden, weight, shift, targets).total.requires_grad


def test_under_autocast_the_head_runs_in_bf16_and_gradients_keep_their_dtypes() -> None:
    hidden, weight, shift, targets = head_tensors()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        plain = F.cross_entropy(F.linear(hidden, weight, shift).float(), targets)
        chunked = linear_cross_entropy(hidden, weight, shift, targets, chunk_size=CHUNK).mean()
    exact = F.cross_entropy(F.linear(hidden, weight, shift), targets)
    torch.testing.assert_close(chunked, plain, rtol=1e-4, atol=1e-4)  # bf16 logits, as plain
    assert not torch.allclose(chunked, exact, rtol=1e-6, atol=1e-6)  # not float32 ones
    for got, expected in zip(
        grads(chunked, hidden, weight, shift), grads(plain, hidden, weight, shift), strict=True
    ):
        assert got.dtype == torch.float32
        torch.testing.assert_close(got, expected, **TOLERANCE[torch.bfloat16])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_log_probs_at_chosen_ids_and_their_gradients_equal_the_plain_computation(dtype):
    hidden, weight, shift, _ = head_tensors(dtype)
    generator = torch.Generator().manual_seed(3)
    ids = torch.randint(V, (N, 6), generator=generator)
    ids[:, 1] = ids[:, 0]  # a repeated id gets both shares of the gradient
    upstream = torch.randn(N, 6, generator=generator)
    plain = F.log_softmax(F.linear(hidden, weight, shift).float() / 2.0, -1).gather(1, ids)
    chunked = linear_log_probs_at(hidden, weight, shift, ids, temperature=2.0, chunk_size=CHUNK)
    torch.testing.assert_close(chunked, plain, **TOLERANCE[dtype])
    expected = grads((plain * upstream).sum(), hidden, weight, shift)
    for got, want in zip(
        grads((chunked * upstream).sum(), hidden, weight, shift), expected, strict=True
    ):
        assert got.dtype == dtype
        torch.testing.assert_close(got, want, **TOLERANCE[dtype])


def test_top_k_gives_the_plain_top_words_and_log_probabilities() -> None:
    hidden, weight, shift, _ = head_tensors()
    log_probs = F.log_softmax(F.linear(hidden, weight, shift) / 1.5, -1)
    top = log_probs.topk(5, dim=-1)
    ids, values = linear_top_k(hidden, weight, shift, 5, temperature=1.5, chunk_size=CHUNK)
    assert not values.requires_grad
    torch.testing.assert_close(values, top.values)
    # the ids are a top k (near-ties may come in another order on another CPU)
    torch.testing.assert_close(log_probs.gather(-1, ids), top.values)


def test_no_tensor_of_positions_times_vocabulary_is_made() -> None:
    hidden, weight, shift, targets = head_tensors()
    ids = torch.randint(V, (N, 4))
    with LargestTensor() as plain:
        logits = F.linear(hidden, weight, shift)
        loss = F.cross_entropy(logits, targets) + F.log_softmax(logits, -1).gather(1, ids).sum()
        loss.backward()
    assert plain.largest >= N * V  # the watch sees the full logits where they are made
    with LargestTensor() as chunked:
        loss = linear_cross_entropy(hidden, weight, shift, targets, chunk_size=CHUNK).mean()
        loss = loss + linear_log_probs_at(hidden, weight, shift, ids, chunk_size=CHUNK).sum()
        loss.backward()
        linear_top_k(hidden, weight, shift, 4, chunk_size=CHUNK)
    assert chunked.largest <= max(CHUNK * V, V * H, N * H) < N * V


def test_the_default_chunk_bounds_its_logits() -> None:
    assert chunk_rows(49152) == 170 and chunk_rows(10**9) == 1
    assert chunk_rows(49152, chunk_size=7) == 7
    with pytest.raises(ConfigError, match="chunk_size must be >= 1"):
        chunk_rows(100, chunk_size=0)


def padded_batch() -> dict[str, torch.Tensor]:
    """Eight rows of twenty tokens, some right-padded."""
    documents = [
        tuple(range(2 + row, 2 + row + length))
        for row, length in enumerate([20, 20, 17, 12, 20, 5, 19, 20])
    ]
    return collate(documents, pad_id=0)


def test_causal_lm_loss_and_gradients_equal_the_model_logits(monkeypatch) -> None:
    monkeypatch.setattr("adaptlab.engine.lm_loss.LOGITS_PER_CHUNK", 32 * 100)  # 32 positions
    model = tiny_model("llama", causal=True)
    batch = padded_batch()
    inputs = {k: batch[k] for k in ("input_ids", "attention_mask")}
    params = [p for p in model.parameters()]
    logits = model(**inputs).logits
    labels = batch["labels"][:, 1:].flatten()
    plain = F.cross_entropy(logits[:, :-1].flatten(0, 1).float(), labels)
    with LargestTensor() as watch:
        chunked = causal_lm_loss(model, **inputs)
        got = torch.autograd.grad(chunked, params)
    torch.testing.assert_close(chunked, plain)
    for mine, theirs in zip(got, torch.autograd.grad(plain, params), strict=True):
        torch.testing.assert_close(mine, theirs, rtol=1e-4, atol=1e-5)
    assert (
        watch.largest < logits.numel() and watch.largest < int(labels.ne(IGNORE_INDEX).sum()) * 100
    )
    explicit = causal_lm_loss(
        model, **inputs, labels=batch["labels"].masked_fill(batch["input_ids"] == 7, IGNORE_INDEX)
    )
    assert not torch.allclose(explicit, chunked)  # labels given are the ones used
    full = {"input_ids": batch["input_ids"][:2]}  # two unpadded rows: no mask needed
    expected = F.cross_entropy(
        model(**full).logits[:, :-1].flatten(0, 1), full["input_ids"][:, 1:].flatten()
    )
    torch.testing.assert_close(causal_lm_loss(model, full["input_ids"], None), expected)


def test_masked_lm_loss_and_gradients_equal_the_model_logits() -> None:
    torch.manual_seed(0)
    model = T.AutoModelForMaskedLM.from_config(tiny_config("bert")).eval()
    generator = torch.Generator().manual_seed(1)
    ids = torch.randint(5, 100, (3, 9), generator=generator)
    labels = ids.masked_fill(torch.rand(ids.shape, generator=generator) < 0.6, IGNORE_INDEX)
    labels[0, 0] = ids[0, 0]
    logits = model(input_ids=ids).logits
    plain = F.cross_entropy(logits.flatten(0, 1), labels.flatten())
    chunked = masked_lm_loss(model, {"input_ids": ids, "labels": labels})
    torch.testing.assert_close(chunked, plain)
    params = [p for p in model.parameters()]
    expected = torch.autograd.grad(plain, params, allow_unused=True)
    got = torch.autograd.grad(chunked, params, allow_unused=True)
    head_bias = model.cls.predictions.bias
    for mine, theirs, param in zip(got, expected, params, strict=True):
        if theirs is None:
            continue
        torch.testing.assert_close(mine, theirs, rtol=1e-4, atol=1e-5)
        if param is head_bias:
            assert theirs.abs().sum() > 0


def test_the_kd_logit_penalty_and_its_gradients_equal_the_full_logits() -> None:
    model = tiny_model("llama", causal=True)
    documents = [tuple(range(2 + i, 12 + i + i % 3)) for i in range(6)]
    stages = [TextStage("old", documents, documents, documents)] * 2
    run = TextStageRun(model, stages, 1, pad_id=0, eval_batch_size=4)
    strategy = TextLogitDistillation(LogitDistillationConfig(temperature=2.0, weight=0.5))
    strategy.begin(run)
    with torch.no_grad():  # move the student away from the teacher
        model.model.norm.weight.mul_(3.0)
    model.train()
    rows = [(1, 0), (0, 3), (1, 4), (1, 5)]
    batch = collate([documents[i] for _, i in rows], 0)
    inputs = {k: batch[k] for k in ("input_ids", "attention_mask")}
    penalty = strategy.penalty(run, rows, lm_head_input(model, **inputs))
    logits = model(**inputs).logits
    terms, tokens = [], 0
    for position, (stage, index) in enumerate(rows):
        if stage == 1:
            cached = strategy.teacher[index]
            count = cached.ids.shape[0]
            full = F.log_softmax(logits[position, :count] / 2.0, -1)
            terms.append(merged_kl(cached, full.gather(1, cached.ids.long())))
            tokens += count
    plain = 0.5 * 4.0 * torch.stack(terms).sum() / tokens
    assert penalty is not None and plain.item() > 1e-3
    torch.testing.assert_close(penalty, plain)
    params = [p for p in model.parameters()]
    for mine, theirs in zip(
        torch.autograd.grad(penalty, params), torch.autograd.grad(plain, params), strict=True
    ):
        torch.testing.assert_close(mine, theirs, rtol=1e-4, atol=1e-6)


def gemma2(softcapping: float | None) -> torch.nn.Module:
    config = T.Gemma2Config(
        vocab_size=100,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=8,
        final_logit_softcapping=softcapping,
    )
    torch.manual_seed(0)
    return T.AutoModelForCausalLM.from_config(config)


def test_a_model_that_changes_its_logits_after_the_head_is_refused() -> None:
    batch = padded_batch()
    inputs = {k: batch[k] for k in ("input_ids", "attention_mask")}
    with pytest.raises(
        ConfigError, match="Gemma2ForCausalLM: config.final_logit_softcapping = 30.0"
    ):
        causal_lm_loss(gemma2(30.0), **inputs)
    plain = gemma2(None)
    logits = plain(**inputs).logits
    expected = F.cross_entropy(logits[:, :-1].flatten(0, 1), batch["labels"][:, 1:].flatten())
    torch.testing.assert_close(causal_lm_loss(plain, **inputs), expected)
    with pytest.raises(ConfigError, match="BertModel has no output embeddings"):
        lm_head_input(T.BertModel(tiny_config("bert")), input_ids=batch["input_ids"])
