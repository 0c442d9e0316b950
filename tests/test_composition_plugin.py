"""A composition block defined here, outside the package, registered once and then used like
Stack or Fuse: activation by object and by data form, its effect at a site, nesting rules,
refusals, and an adapter folder that records it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
from tiny_models import tiny_inputs, tiny_model
from torch import nn
from torch.nn import functional as F

import adaptlab
from adaptlab import Stack
from adaptlab.errors import ConfigError
from adaptlab.methods.blocks import BLOCKS, Adapters, Block
from adaptlab.methods.dispatch import Inputs, Step
from adaptlab.methods.handle import AdaptHandle


@BLOCKS.register
class Mean(Block):
    """Every adapter from the same site output; their outputs averaged."""

    name = "mean"
    children: tuple[str, ...]

    def check(self, adapters: Adapters) -> None:
        for child in self.children:
            adapters.require_separable(child, "Mean")

    def step(self, site: str, adapters: Adapters) -> Step | None:
        children = tuple(adapters.step(child, site) for child in self.children)
        return None if all(c is None for c in children) else MeanStep(children)

    def head_owner(self, adapters: Adapters) -> AdaptHandle | None:
        return adapters.head_owner(self.children[-1])

    def saved_with(self, unit: AdaptHandle, adapters: Adapters) -> bool:
        return self.children[-1] == unit.name


@dataclass(frozen=True)
class MeanStep(Step):
    children: tuple[Step | None, ...]

    def run(self, h: torch.Tensor, inputs: Inputs) -> torch.Tensor:
        outputs = [h if child is None else child.run(h, inputs) for child in self.children]
        return torch.stack(outputs).mean(dim=0)

    def reads(self) -> Iterator[str]:
        return (source for child in self.children if child for source in child.reads())


def logits(model: nn.Module) -> torch.Tensor:
    with torch.no_grad():
        return model(**tiny_inputs()).logits  # type: ignore[no-any-return]


def with_two_loras() -> nn.Module:
    """A model with LoRA adapters a and b whose B matrices are random (not the zero start)."""
    model = tiny_model("bert")
    for seed, name in ((1, "a"), (2, "b")):
        handle = adaptlab.add_adapter(model, name, "lora", seed=seed, train_head=False)
        generator = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for insertion in handle.insertions["lora"]:
                B = insertion.module.B
                B.copy_(torch.randn(B.shape, generator=generator))
    return model


def test_a_block_from_outside_runs_the_mean_of_its_adapters_at_each_site() -> None:
    model = with_two_loras()
    adaptlab.set_active(model, Mean("a", "b"))
    assert adaptlab.active(model) == Mean("a", "b")
    [a, b] = (adaptlab.get_handle(model, n).insertions["lora"][0] for n in ("a", "b"))
    assert a.site == b.site
    linear = model.get_submodule(a.site)
    seen: dict[str, torch.Tensor] = {}
    hooks = [
        linear.register_forward_pre_hook(lambda m, args: seen.update(x=args[0])),
        linear.register_forward_hook(lambda m, args, out: seen.update(y=out)),
    ]
    through_model = logits(model)
    for hook in hooks:
        hook.remove()
    x = seen["x"]
    by_hand = F.linear(x, linear.weight, linear.bias) + 0.5 * (
        a.module.scaling * x @ a.module.A.T @ a.module.B.T
        + b.module.scaling * x @ b.module.A.T @ b.module.B.T
    )
    assert torch.allclose(seen["y"], by_hand, atol=1e-5)
    adaptlab.set_active(model, "a")
    alone = logits(model)
    adaptlab.set_active(model, {"mean": ["a", "b"]})  # its data form, read through the registry
    assert adaptlab.active(model) == Mean("a", "b")
    assert torch.equal(logits(model), through_model) and not torch.allclose(alone, through_model)


def test_the_block_is_checked_like_the_built_in_ones() -> None:
    with pytest.raises(ConfigError, match="Stack cannot hold a Mean block"):
        Stack("a", Mean("b"))
    with pytest.raises(ConfigError, match="appears twice in Mean"):
        Mean("a", "a")
    model = with_two_loras()
    adaptlab.add_adapter(model, "c", "bitfit")
    adaptlab.set_active(model, "a")
    with pytest.raises(ConfigError, match="Mean: adapter 'c' trains pretrained weights"):
        adaptlab.set_active(model, Mean("a", "c"))
    assert adaptlab.active(model) == "a"


def test_a_folder_saved_under_the_block_records_it_and_loads_onto_a_bare_model(
    tmp_path: Path,
) -> None:
    model = with_two_loras()
    adaptlab.set_active(model, Mean("a", "b"))
    expected = logits(model)
    adaptlab.save_adapter(model, tmp_path, name="b")
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["composition"] == {"mean": ["a", "b"]}
    assert list(manifest["members"]) == ["a"]
    fresh = tiny_model("bert")
    adaptlab.load_adapter(fresh, tmp_path)
    assert adaptlab.active(fresh) == Mean("a", "b")
    assert torch.equal(logits(fresh), expected)
