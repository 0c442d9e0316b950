"""`Fuse("a", "b", "c")`: AdapterFusion (Pfeiffer et al. 2021). At every site each adapter's
output is computed from the same input and the fusion layer trained over exactly these
adapters (`adaptlab.add_fusion`) mixes them by attention. A Fuse holds adapter names only."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import torch
from torch import nn

from adaptlab.errors import ConfigError
from adaptlab.methods.blocks.base import BLOCKS, Adapters, Block
from adaptlab.methods.dispatch import Inputs, Step
from adaptlab.methods.handle import AdaptHandle


@BLOCKS.register
class Fuse(Block):
    """AdapterFusion over adapters (names only)."""

    name = "fuse"
    children: tuple[str, ...]

    def fusion(self, adapters: Adapters) -> AdaptHandle:
        """The fusion trained over exactly these adapters, in this order."""
        for unit in adapters.units.values():
            if unit.fused == self.children:
                return unit
        raise ConfigError(f"no fusion layers for {self} on this model; add them with add_fusion")

    def check_fusable(self, adapters: Adapters) -> None:
        """These adapters exist, may be fused, and have no fusion layers yet."""
        for child in self.children:
            adapters.check(child)
            adapters.require_separable(child, "Fuse")
        for unit in adapters.units.values():
            if unit.fused == self.children:
                raise ConfigError(f"{self} already has fusion layers ({unit.name!r})")

    def check(self, adapters: Adapters) -> None:
        for child in self.children:
            adapters.require_separable(child, "Fuse")
        self.fusion(adapters)

    def step(self, site: str, adapters: Adapters) -> Step | None:
        children = tuple(adapters.step(child, site) for child in self.children)
        if all(child is None for child in children):
            return None
        layers = self.fusion(adapters).fusion_layers
        if site not in layers:
            raise ConfigError(f"{self}: its fusion has no layer at {site!r}")
        return FuseStep(children, layers[site])

    def head_owner(self, adapters: Adapters) -> AdaptHandle | None:
        return adapters.with_head(self.fusion(adapters))

    def own_units(self, adapters: Adapters) -> list[AdaptHandle]:
        return [self.fusion(adapters)]


@dataclass(frozen=True)
class FuseStep(Step):
    """Every child from the same h (a child with nothing here gives h), mixed by the layer."""

    children: tuple[Step | None, ...]
    layer: nn.Module

    def run(self, h: torch.Tensor, inputs: Inputs) -> torch.Tensor:
        outputs = [h if child is None else child.run(h, inputs) for child in self.children]
        return self.layer(h, torch.stack(outputs))  # type: ignore[no-any-return]

    def reads(self) -> Iterator[str]:
        return (source for child in self.children if child for source in child.reads())
