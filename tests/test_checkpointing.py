"""Activation checkpointing: the same gradients as training without it, for every method
family and a composition of named adapters, with dropout on."""

from __future__ import annotations

from contextlib import nullcontext

import pytest
import torch
from tiny_models import tiny_inputs, tiny_model
from torch import nn

import adaptlab
from adaptlab import Fuse, Parallel, Stack
from adaptlab.engine.checkpointing import enable_checkpointing, offloaded_activations
from adaptlab.errors import ConfigError

FAMILIES = {
    "lora": "lora",
    "dora": {"lora": {"dora": True}},
    "bottleneck": "houlsby",
    "parallel": "parallel",
    "ia3": "ia3",
    "prefix": "prefix",
    "bitfit": "bitfit",
    "lnfit": "lnfit",
    "full": "full",
    "mixout": {"full": {"mixout": 0.1}},  # the whole model runs without dropout
    "head": "head",  # every block frozen: run without dropout, never recomputed
    "freeze": {"freeze": {"k": 1}},  # the first block frozen, the second trains
    "mam": {"mam": {"hidden_size": 16, "reparam_hidden": 16, "prefix_length": 4}},
}


def _gradients(model: nn.Module, checkpointing: bool) -> dict[str, torch.Tensor | None]:
    """Every trainable tensor's gradient after one train-mode forward and backward (None for
    one the loss does not reach, such as a bias a model does not have in use)."""
    if checkpointing:
        enable_checkpointing(model)
    model.train()
    torch.manual_seed(7)  # the same dropout masks (checkpointing restores the RNG to recompute)
    inputs = tiny_inputs(batch=4, length=12)
    labels = torch.tensor([0, 1, 2, 1])
    model(**inputs, labels=labels).loss.backward()
    grads = {n: p.grad for n, p in model.named_parameters() if p.requires_grad}
    assert any(g is not None and g.abs().sum() > 0 for g in grads.values())
    return grads


def _assert_same(
    plain: dict[str, torch.Tensor | None], checkpointed: dict[str, torch.Tensor | None]
) -> None:
    assert plain.keys() == checkpointed.keys()
    for name, grad in plain.items():
        if grad is None:
            assert checkpointed[name] is None, name
        else:
            torch.testing.assert_close(checkpointed[name], grad, rtol=1e-4, atol=1e-6, msg=name)


def _adapted(arch: str, method: object) -> nn.Module:
    model = tiny_model(arch, seed=0)
    for module in model.modules():  # dropout on everywhere, so the RNG replay is exercised
        if isinstance(module, nn.Dropout):
            module.p = 0.1
    adaptlab.adapt(model, method, seed=1)  # type: ignore[arg-type]
    _move_from_zero(model)
    return model


def _move_from_zero(model: nn.Module) -> None:
    """Nudge what trains away from its initial value (LoRA's B starts at zero, which would
    leave most gradients zero and the comparison weak)."""
    generator = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for parameter in model.parameters():
            if parameter.requires_grad:
                parameter.add_(0.05 * torch.randn(parameter.shape, generator=generator))


@pytest.mark.parametrize("family", sorted(FAMILIES))
@pytest.mark.parametrize("arch", ["bert", "llama"])
def test_checkpointed_gradients_equal_plain_ones(family: str, arch: str) -> None:
    if arch == "llama" and family not in ("lora", "dora", "ia3", "lnfit", "full", "head", "freeze"):
        pytest.skip("on BERT only (Llama has no biases for BitFit; adapters share one path)")
    plain = _gradients(_adapted(arch, FAMILIES[family]), checkpointing=False)
    checkpointed = _gradients(_adapted(arch, FAMILIES[family]), checkpointing=True)
    _assert_same(plain, checkpointed)


def _composed(kind: str) -> nn.Module:
    model = tiny_model("bert", seed=0)
    adaptlab.add_adapter(model, "a", "pfeiffer", seed=1)
    adaptlab.add_adapter(model, "b", "lora", seed=2)
    if kind == "fuse":
        adaptlab.add_adapter(model, "c", "pfeiffer", seed=3)
        adaptlab.add_fusion(model, Fuse("a", "c"), seed=4)
    else:
        adaptlab.set_active(model, Stack("a", "b") if kind == "stack" else Parallel("a", "b"))
        adaptlab.train_adapter(model, "b")
    _move_from_zero(model)
    return model


@pytest.mark.parametrize("kind", ["stack", "parallel", "fuse"])
def test_checkpointing_keeps_compositions_gradients(kind: str) -> None:
    _assert_same(
        _gradients(_composed(kind), checkpointing=False),
        _gradients(_composed(kind), checkpointing=True),
    )


def test_a_model_without_checkpointing_support_is_refused() -> None:
    with pytest.raises(ConfigError, match="does not support activation checkpointing"):
        enable_checkpointing(nn.Linear(2, 2))


def test_offloading_copies_activations_to_host_and_leaves_the_weights() -> None:
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
    x = torch.randn(5, 4)
    model(x).sum().backward()
    plain = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    # as on a GPU: the device is the accelerator's, the copies land in host memory
    hooks = offloaded_activations(torch.device("cuda"), model.parameters())
    assert isinstance(hooks, torch.autograd.graph.saved_tensors_hooks)
    weight, activation = model[2].weight, torch.tanh(x @ model[0].weight.T)
    assert hooks.pack_hook(weight) == (None, weight)  # a weight stays where it is
    home, copy = hooks.pack_hook(activation)
    assert home == activation.device and torch.equal(copy, activation)
    assert copy.untyped_storage().data_ptr() != activation.untyped_storage().data_ptr()
    with hooks:
        model(x).sum().backward()
    for found, expected in zip((p.grad for p in model.parameters()), plain, strict=True):
        torch.testing.assert_close(found, expected)
    assert isinstance(offloaded_activations(torch.device("cpu")), nullcontext)  # nothing to move
