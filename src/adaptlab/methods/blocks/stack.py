"""`Stack("lang", "task")`: at every site the adapters run in order, each on the output of the
one before (MAD-X: a language adapter under a task adapter). A Stack holds adapter names and
Fuse blocks; its head is its top-most adapter's (or fusion's) that has one."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import torch

from adaptlab.methods.blocks.base import BLOCKS, Adapters, Block
from adaptlab.methods.blocks.fuse import Fuse
from adaptlab.methods.dispatch import Inputs, Step
from adaptlab.methods.handle import AdaptHandle


@BLOCKS.register
class Stack(Block):
    """Adapters run one after the other at every site (names and Fuse blocks)."""

    name = "stack"
    holds = (Fuse,)
    children: tuple[str | Fuse, ...]

    def step(self, site: str, adapters: Adapters) -> Step | None:
        steps = [adapters.step(child, site) for child in self.children]
        present = tuple(step for step in steps if step is not None)
        if not present:
            return None
        return present[0] if len(present) == 1 else StackStep(present)

    def head_owner(self, adapters: Adapters) -> AdaptHandle | None:
        for child in reversed(self.children):
            owner = adapters.head_owner(child)
            if owner is not None:
                return owner
        return None

    def saved_with(self, unit: AdaptHandle, adapters: Adapters) -> bool:
        """A folder saved for the Stack's top adapter (a task adapter over a language adapter)
        or top fusion records the Stack and holds the adapters below it."""
        top = self.children[-1]
        return top == unit.name or (isinstance(top, Block) and unit in top.own_units(adapters))


@dataclass(frozen=True)
class StackStep(Step):
    """Children in order, each on the output of the one before."""

    children: tuple[Step, ...]

    def run(self, h: torch.Tensor, inputs: Inputs) -> torch.Tensor:
        for child in self.children:
            h = child.run(h, inputs)
        return h

    def reads(self) -> Iterator[str]:
        return (source for child in self.children for source in child.reads())
