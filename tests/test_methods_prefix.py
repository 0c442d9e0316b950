"""Prefix tuning: through the attention interface on every architecture that uses it, padded
batches and key-value caches unchanged, the MLP folded away when saved, Stack concatenates."""

from __future__ import annotations

from pathlib import Path

import pytest
import safetensors.torch
import torch
from tiny_models import ARCHS, HIDDEN, LAYERS, VOCAB, tiny_inputs, tiny_model, train_steps

import adaptlab
from adaptlab import Fuse, Stack
from adaptlab.errors import ConfigError

PREFIXED = tuple(a for a in ARCHS if a != "mpnet")


def logits(model: torch.nn.Module, **inputs: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return model(**(inputs or tiny_inputs())).logits


@pytest.mark.parametrize("arch", PREFIXED)
def test_padded_batch_equals_each_example_alone(arch: str) -> None:
    model = tiny_model(arch)
    lengths = (9, 5, 2)
    ids = tiny_inputs(batch=3, length=9)["input_ids"]
    mask = torch.zeros_like(ids)
    for row, n in enumerate(lengths):
        mask[row, :n] = 1
    batch = {"input_ids": torch.where(mask.bool(), ids, model.config.pad_token_id or 0)}
    batch["attention_mask"] = mask
    base = logits(model, **batch)
    adaptlab.adapt(model, "prefix", length=4)
    padded = logits(model, **batch)
    for row, n in enumerate(lengths):
        alone = logits(
            model, input_ids=ids[row : row + 1, :n], attention_mask=mask[row : row + 1, :n]
        )
        assert (padded[row] - alone[0]).abs().max().item() <= 1e-5
    assert not torch.allclose(padded, base, rtol=1e-3, atol=1e-7)  # the prefixes count


def test_causal_lm_generates_with_a_kv_cache_as_without_one() -> None:
    # Scores, not tokens, are compared: a greedy pick between two near-tied words of a random
    # model can fall either way when the cache, the padding or the batch rounds differently.
    # Each step's scores from the cache must be those one uncached pass over the whole
    # sequence gives (the prefixes move them by over 1e-2, rounding by about 1e-7).
    model = tiny_model("llama", causal=True)
    adaptlab.adapt(model, "prefix", length=3)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("embedding"):
                p.mul_(20)
    options = dict(
        max_new_tokens=8,
        min_new_tokens=8,  # no early end: the cache serves every step
        do_sample=False,
        pad_token_id=0,
        use_cache=True,
        output_logits=True,
        return_dict_in_generate=True,
    )

    def uncached(ids: torch.Tensor, prompt: int) -> torch.Tensor:
        """The scores of each generated token, from one pass without a cache."""
        return logits(model, input_ids=ids)[:, prompt - 1 : -1]

    out = model.generate(**tiny_inputs(batch=1, length=5), **options)
    steps = torch.stack(out.logits, 1)
    assert steps.shape == (1, 8, VOCAB)
    torch.testing.assert_close(steps, uncached(out.sequences, 5), rtol=0, atol=1e-5)
    with adaptlab.disabled(model):
        plain = uncached(out.sequences, 5)
    assert (plain - steps).abs().max().item() > 1e-2  # the prefixes count
    two = tiny_inputs(batch=2, length=5)  # left-padded batch: the second prompt is 3 tokens
    two["input_ids"][1, :2], two["attention_mask"][1, :2] = 0, 0
    batched = model.generate(**two, **options)
    steps = torch.stack(batched.logits, 1)
    torch.testing.assert_close(steps[:1], uncached(batched.sequences[:1], 5), rtol=0, atol=1e-5)
    alone = uncached(batched.sequences[1:, 2:], 3)  # the second row without its padding
    torch.testing.assert_close(steps[1:], alone, rtol=0, atol=1e-5)


def test_eager_and_sdpa_agree() -> None:
    sdpa = tiny_model("bert")
    adaptlab.adapt(sdpa, "prefix", length=4)
    eager = tiny_model("bert")
    eager.config._attn_implementation = "eager"
    adaptlab.adapt(eager, "prefix", length=4)
    assert eager.config._attn_implementation.endswith("eager")
    assert (logits(eager) - logits(sdpa)).abs().max().item() <= 1e-5


def test_saved_folder_holds_the_prefixes_not_the_mlp(tmp_path: Path) -> None:
    model = tiny_model("bert", head_seed=1)
    handle = adaptlab.adapt(model, "prefix", length=4, reparam_hidden=16)
    width = 2 * LAYERS * HIDDEN
    assert handle.parameter_counts()["prefix"] == 4 * HIDDEN + (HIDDEN + 1) * 16 + (16 + 1) * width
    train_steps(model, lr=1e-2)
    expected = logits(model)
    adaptlab.save_adapter(model, tmp_path)
    manifest = adaptlab.read_manifest(tmp_path)
    assert manifest["methods"][0]["config"]["reparameterize"] is False
    names = safetensors.torch.load_file(str(tmp_path / "adapter.safetensors"))
    prefixes = [n for n in names if "adaptlab_prefix" in n]
    assert len(prefixes) == 2 * LAYERS and all(names[n].shape == (4, HIDDEN) for n in prefixes)
    fresh = tiny_model("bert", head_seed=2)
    adaptlab.load_adapter(fresh, tmp_path)
    assert torch.equal(logits(fresh), expected)
    counts = adaptlab.get_handle(fresh).parameter_counts()
    assert counts["prefix"] == 2 * LAYERS * 4 * HIDDEN


def test_stack_concatenates_the_prefixes() -> None:
    model = tiny_model("llama")
    adaptlab.add_adapter(model, "a", "prefix", length=2, reparameterize=False, seed=1)
    adaptlab.add_adapter(model, "b", "prefix", length=3, reparameterize=False, seed=2)
    adaptlab.add_adapter(model, "ab", "prefix", length=5, reparameterize=False)
    a, b, ab = (adaptlab.get_handle(model, n) for n in ("a", "b", "ab"))
    with torch.no_grad():
        for name, tensor in ab.inserted_tensors().items():
            tensor.copy_(
                torch.cat(
                    [
                        a.inserted_tensors()[name.replace(".ab.", ".a.")],
                        b.inserted_tensors()[name.replace(".ab.", ".b.")],
                    ]
                )
            )
    adaptlab.set_active(model, Stack("a", "b"))
    stacked = logits(model)
    adaptlab.set_active(model, "ab")
    assert (logits(model) - stacked).abs().max().item() <= 1e-6
    adaptlab.set_active(model, "a")
    assert not torch.allclose(logits(model), stacked)
    with pytest.raises(ConfigError, match="cannot combine per adapter"):
        adaptlab.add_fusion(model, Fuse("a", "b"))


def test_mpnet_is_refused_in_one_line() -> None:
    model = tiny_model("mpnet")
    with pytest.raises(ConfigError) as error:
        adaptlab.adapt(model, "prefix")
    assert "computes attention in its own code" in str(error.value)
    assert "\n" not in str(error.value)
    assert model.config._attn_implementation == "eager" and VOCAB


@pytest.mark.parametrize(
    ("options", "message"),
    [({"length": 0}, "length must be a positive integer"), ({"length": 10**9}, "at most 4096")],
)
def test_bad_lengths_fail_before_anything_is_allocated(options: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        adaptlab.make_config("prefix", options)
