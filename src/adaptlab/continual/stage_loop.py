"""One stage of a sequence in the epoch loop (`adaptlab.engine.loop`), whatever its objective:
the stage's own examples in the loop's order, each batch joined by the strategy's replayed rows
of earlier stages; the stage's loss (its `StageInTraining.forward`) with the strategy's penalty
added; its dev score picking the best epoch; the loop seeded by the sequence's seed plus the
stage's index; the sequence's scale for the loop's precision, and the strategy's `end` called
at that precision once the best epoch's weights are back."""

from __future__ import annotations

from typing import Any, Generic, TypeVar

import torch

from adaptlab.continual.stages import Row, StageInTraining
from adaptlab.continual.strategy import Strategy
from adaptlab.engine.history import TrainHistory
from adaptlab.engine.loop import train_epochs
from adaptlab.engine.objective import DevScore
from adaptlab.engine.precision import autocast_at
from adaptlab.engine.scale_model import FLOAT32
from adaptlab.records.config import TrainConfig
from adaptlab.records.scale import Scale

OutputsT = TypeVar("OutputsT")


class StageObjective(Generic[OutputsT]):
    """Stage `run.index` as the epoch loop's `Objective`, trained with `strategy`."""

    def __init__(self, run: StageInTraining[OutputsT], strategy: Strategy[Any, OutputsT]) -> None:
        stage = run.stages[run.index]
        self.title = f"stage {run.index + 1}/{len(run.stages)} {stage.name} "
        self.examples = len(stage.train)
        self.metric = run.metric
        self.run, self.strategy = run, strategy

    def batch(self, indices: list[int], generator: torch.Generator) -> list[Row]:
        rows: list[Row] = [(self.run.index, i) for i in indices]
        return rows + self.strategy.replayed(self.run, len(rows), generator)

    def loss(self, rows: list[Row]) -> torch.Tensor:
        """The stage's loss of a batch of rows, plus the strategy's term."""
        loss, outputs = self.run.forward(rows, self.strategy.hidden_states)
        extra = self.strategy.penalty(self.run, rows, outputs)
        return loss if extra is None else loss + extra

    def loss_terms(self, rows: list[Row]) -> int:
        """What the batch's loss is a mean over (for data-parallel shares)."""
        return self.run.loss_terms(rows)

    def dev(self) -> DevScore:
        return self.run.dev()


def train_stage(
    run: StageInTraining[OutputsT],
    strategy: Strategy[Any, OutputsT],
    config: TrainConfig,
    learning_rate: float,
    *,
    scale: Scale = FLOAT32,
    progress: bool = True,
) -> TrainHistory:
    """Train the model's trainable tensors on stage `run.index` at `scale` (the sequence's, the
    one its model was prepared for), keep its best dev epoch, then call the strategy's `end`
    at the scale's precision."""
    objective = StageObjective(run, strategy)
    seed = config.seed + run.index
    history = train_epochs(
        run.model, objective, config, learning_rate, scale=scale, progress=progress, seed=seed
    )
    with autocast_at(scale.precision, next(run.model.parameters()).device):
        strategy.end(run)
    return history
