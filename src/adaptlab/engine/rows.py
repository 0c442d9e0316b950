"""`Rows`: adapters on contiguous row ranges of one batch, the base model on the other rows.

A generation step runs every sequence of the server in as few forward passes as it can: the
base model's matrix products run once over the whole batch, and at each site each adapter's
step (`adaptlab.methods.dispatch`) runs on its own slice of rows, as `Parallel` runs branch i
on copy i (but on rows the caller laid out, not on copies). Only adapters that act by a change
at their sites qualify (`NamedAdapters.require_separable`: LoRA, bottleneck adapters, ...);
an adapter that rewrites inputs, weights or attention keys ((IA)3, prefix tuning) or trains
pretrained weights runs in a forward of its own. The block is built anew for each layout and
never saved, so it is not registered as a data form (`adaptlab.methods.blocks.BLOCKS`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import torch

from adaptlab.errors import ConfigError
from adaptlab.methods.blocks import Block
from adaptlab.methods.blocks.base import Adapters
from adaptlab.methods.dispatch import Inputs, Step
from adaptlab.methods.handle import AdaptHandle

Span = tuple[str, int, int]
"""An adapter's name and its rows [start, stop) of the batch."""


class Rows(Block):
    """Adapter `name` runs on rows [start, stop) for each span; other rows run the base."""

    name = "rows"
    outermost = True
    children: tuple[str, ...]
    spans: tuple[Span, ...]

    def __init__(self, spans: Sequence[Span]) -> None:
        super().__init__(*(name for name, _, _ in spans))
        at = 0
        for name, start, stop in spans:
            if not at <= start < stop:
                raise ConfigError(f"Rows: rows {start}..{stop} of {name!r} overlap or are empty")
            at = stop
        object.__setattr__(self, "spans", tuple(spans))

    def check(self, adapters: Adapters) -> None:
        for name in self.children:
            adapters.require_separable(name, "a mixed batch")
            if adapters.with_head(adapters.units[name]) is not None:
                raise ConfigError(f"a mixed batch: adapter {name!r} has a head of its own")

    def step(self, site: str, adapters: Adapters) -> Step | None:
        steps = tuple(
            (step, start, stop)
            for name, start, stop in self.spans
            if (step := adapters.step(name, site)) is not None
        )
        return RowsStep(steps) if steps else None

    def head_owner(self, adapters: Adapters) -> AdaptHandle | None:
        return None  # every row runs the base model's head

    def __repr__(self) -> str:
        return f"Rows({', '.join(f'{n}[{a}:{b}]' for n, a, b in self.spans)})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Rows) and other.spans == self.spans

    def __hash__(self) -> int:
        return hash(self.spans)


@dataclass(frozen=True)
class RowsStep(Step):
    """Each child step on its rows of h (and of the inputs it reads); other rows untouched."""

    children: tuple[tuple[Step, int, int], ...]

    def run(self, h: torch.Tensor, inputs: Inputs) -> torch.Tensor:
        pieces, at = [], 0
        for step, start, stop in self.children:
            if start > at:
                pieces.append(h[at:start])
            rows = {name: x[start:stop] for name, x in inputs.items()}
            pieces.append(step.run(h[start:stop], rows))
            at = stop
        if at < h.shape[0]:
            pieces.append(h[at:])
        return torch.cat(pieces)

    def reads(self) -> Iterator[str]:
        return (source for step, _, _ in self.children for source in step.reads())


def can_share_rows(adapters: Adapters, name: str) -> bool:
    """Whether adapter `name` may run on its rows of a mixed batch (`Rows`)."""
    try:
        Rows([(name, 0, 1)]).check(adapters)
    except ConfigError:
        return False
    return True
