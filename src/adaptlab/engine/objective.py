"""What a task brings to the epoch loop (`adaptlab.engine.loop`): how the examples the loop
picks become a batch, what a batch's loss is, and how an epoch is scored on dev. Everything
else about a step (backward, clipping, the optimiser, progress, the best epoch) is the loop's,
so classification, masked and causal LM and continual stages train the same way."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, TypeVar, runtime_checkable

import torch

BatchT = TypeVar("BatchT")
TensorBatch = dict[str, torch.Tensor]
"""A batch as most objectives make it: tensors by input name."""


@dataclass(frozen=True)
class DevScore:
    """One epoch's dev evaluation: mean loss, metrics, and the score the best epoch is chosen
    by (higher is better)."""

    loss: float
    metrics: dict[str, float]
    score: float


class Objective(Protocol[BatchT]):
    """A training objective over `examples` training examples, numbered from 0."""

    @property
    def title(self) -> str:
        """What the progress bar says before "epoch": "" for a run, the stage for a stage."""
        ...

    @property
    def metric(self) -> str:
        """The dev metric the run records as picking its best epoch."""
        ...

    @property
    def examples(self) -> int:
        """How many training examples an epoch goes through."""
        ...

    def batch(self, indices: list[int], generator: torch.Generator) -> BatchT:
        """The training batch of examples `indices`; random draws (masks, replay) from
        `generator`, the loop's seeded one."""
        ...

    def loss(self, batch: BatchT) -> torch.Tensor:
        """The batch's training loss (a forward pass in training mode)."""
        ...

    def dev(self) -> DevScore:
        """Score the model as it is now on the dev examples."""
        ...


@runtime_checkable
class ReusesBatches(Protocol):
    """An objective that trains on each batch for several optimiser steps in a row (GRPO's mu
    steps per generated batch): the loop asks for a batch once, then takes that many steps."""

    @property
    def updates_per_batch(self) -> int: ...


def updates_per_batch(objective: object) -> int:
    """The optimiser steps the loop takes on each of `objective`'s batches (1 unless it says)."""
    return objective.updates_per_batch if isinstance(objective, ReusesBatches) else 1
