"""Ladder Side-Tuning: no gradient through the backbone, padding, causal models, saving."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from tiny_models import ARCHS, tiny_inputs, tiny_model, train_steps

import adaptlab
from adaptlab.errors import ConfigError


def logits(model: torch.nn.Module, **inputs: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return model(**(inputs or tiny_inputs())).logits


@pytest.mark.parametrize("arch", ARCHS)
def test_no_gradient_flows_through_the_backbone(arch: str) -> None:
    model = tiny_model(arch)
    handle = adaptlab.adapt(model, "lst")
    outputs: list[bool] = []
    for block in handle.backbone.blocks:
        model.get_submodule(block.name).register_forward_hook(
            lambda m, a, out: outputs.append(
                (out[0] if isinstance(out, tuple) else out).requires_grad
            ),
            prepend=True,  # the block's own output, before the side network's ladder
        )
    model.train()
    loss = model(**tiny_inputs(), labels=torch.tensor([0, 1, 2])).loss
    loss.backward()
    assert outputs == [False] * len(outputs)  # no autograd graph inside the backbone
    trained = {n for n, p in model.named_parameters() if p.grad is not None}
    assert trained == set(handle.trainable_names)
    assert any(".lst.first_down." in n for n in trained) and any(".lst.up." in n for n in trained)


@pytest.mark.parametrize("arch", ("bert", "llama"))
def test_padded_batch_equals_each_example_alone(arch: str) -> None:
    model = tiny_model(arch)
    adaptlab.adapt(model, "lst")
    ids = tiny_inputs(batch=3, length=7)["input_ids"]
    lengths = (7, 4, 2)
    mask = torch.zeros_like(ids)
    for row, n in enumerate(lengths):
        mask[row, :n] = 1
    padded = logits(model, input_ids=torch.where(mask.bool(), ids, 0), attention_mask=mask)
    for row, n in enumerate(lengths):
        alone = logits(
            model, input_ids=ids[row : row + 1, :n], attention_mask=mask[row : row + 1, :n]
        )
        assert (padded[row] - alone[0]).abs().max().item() <= 1e-5


def test_the_side_network_of_a_causal_model_is_causal() -> None:
    model = tiny_model("llama", causal=True)
    adaptlab.adapt(model, "lst")
    ids = tiny_inputs(batch=1, length=6)["input_ids"]
    full = logits(model, input_ids=ids)
    start = logits(model, input_ids=ids[:, :4])
    assert (full[:, :4] - start).abs().max().item() <= 1e-5  # later tokens change nothing before
    with pytest.raises(ConfigError, match="keeps no key-value cache"):
        model.generate(input_ids=ids, max_new_tokens=2, do_sample=False, pad_token_id=0)
    assert model.generate(
        input_ids=ids, max_new_tokens=2, use_cache=False, pad_token_id=0
    ).shape == (
        1,
        8,
    )


def test_save_load_exact(tmp_path: Path) -> None:
    model = tiny_model("mpnet", head_seed=1)
    adaptlab.adapt(model, "lst")
    train_steps(model, lr=1e-2)
    expected = logits(model)
    adaptlab.save_adapter(model, tmp_path)
    fresh = tiny_model("mpnet", head_seed=2)
    adaptlab.load_adapter(fresh, tmp_path)
    assert torch.equal(logits(fresh), expected)


def test_cannot_be_combined_or_fused() -> None:
    with pytest.raises(ConfigError, match="'lst' cannot be combined"):
        adaptlab.adapt(tiny_model("bert"), "lst+bitfit")
    model = tiny_model("bert")
    adaptlab.add_adapter(model, "a", "lst")
    adaptlab.add_adapter(model, "b", "pfeiffer")
    with pytest.raises(ConfigError, match="cannot combine per adapter"):
        adaptlab.add_fusion(model, adaptlab.Fuse("a", "b"))
