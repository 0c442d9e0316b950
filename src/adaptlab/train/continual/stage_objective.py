"""What every stage of a sequence brings to the epoch loop, whatever it trains for: its place
in the sequence (for the progress bar), its batches (the stage's own examples in the loop's
order, each batch joined by the strategy's replayed rows of earlier stages) and its seed (the
sequence's plus the stage's index)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Generic, Protocol, TypeVar

import torch

from adaptlab.train.config import TrainConfig
from adaptlab.train.continual.stages import Row, StageInTraining
from adaptlab.train.history import TrainHistory
from adaptlab.train.loop import train_epochs
from adaptlab.train.objective import DevScore

RunT = TypeVar("RunT", bound=StageInTraining)
RunT_contra = TypeVar("RunT_contra", contravariant=True)


class Replaying(Protocol[RunT_contra]):
    """A strategy, as far as batches go: the earlier rows it adds to a batch."""

    def replayed(self, run: RunT_contra, new_rows: int, generator: torch.Generator) -> list[Row]:
        """Earlier stages' rows to join a batch of `new_rows` rows of the training stage."""
        ...


StrategyT = TypeVar("StrategyT", bound=Replaying[Any])


class StageObjective(ABC, Generic[RunT, StrategyT]):
    """The shared part of a stage's `Objective`; subclasses give its loss and dev score."""

    metric: str

    def __init__(self, run: RunT, strategy: StrategyT, eval_batch_size: int) -> None:
        stage = run.stages[run.index]
        self.title = f"stage {run.index + 1}/{len(run.stages)} {stage.name} "
        self.examples = len(stage.train)
        self.run, self.strategy, self.eval_batch_size = run, strategy, eval_batch_size
        self.device = next(run.model.parameters()).device

    def batch(self, indices: list[int], generator: torch.Generator) -> list[Row]:
        rows: list[Row] = [(self.run.index, i) for i in indices]
        return rows + self.strategy.replayed(self.run, len(rows), generator)

    @abstractmethod
    def loss(self, rows: list[Row]) -> torch.Tensor:
        """The loss of a batch of rows, with the strategy's term."""

    @abstractmethod
    def dev(self) -> DevScore:
        """The stage's dev score."""

    def train(self, config: TrainConfig, learning_rate: float, progress: bool) -> TrainHistory:
        """The epoch loop on this stage, seeded by the sequence's seed plus the stage's index;
        on return the model holds the stage's best dev epoch."""
        seed = config.seed + self.run.index
        model = self.run.model
        return train_epochs(model, self, config, learning_rate, progress=progress, seed=seed)
