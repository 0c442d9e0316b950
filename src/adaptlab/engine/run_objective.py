"""What a kind of run brings to `adaptlab.runs.run.execute` beyond the epochs: an objective
(`adaptlab.engine.objective`) that also knows its model and data, how the test is scored and
what the result records of them. Labelled tasks (`classification_run`) and masked-LM
(`mlm_run`) are the kinds a run spec can ask for."""

from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from torch import nn

from adaptlab.engine.objective import Objective
from adaptlab.engine.trained_run import TrainedRun
from adaptlab.methods.handle import AdaptHandle
from adaptlab.records.generated import Generated
from adaptlab.records.result import DataInfo, SiteWeights
from adaptlab.records.split_record import SplitRecord
from adaptlab.records.transfer import ZeroShotScore
from adaptlab.tasks.classes import ClassCounts


@dataclass(frozen=True)
class Tested:
    """A trained run's test: mean loss and metrics, with what the task adds to the result
    (per-class counts, zero-shot scores, the fusion weights on dev, generated answers)."""

    loss: float
    metrics: dict[str, float]
    classes: tuple[ClassCounts, ...] | None = None
    zero_shot: tuple[ZeroShotScore, ...] | None = None
    fusion_weights: tuple[SiteWeights, ...] | None = None
    generations: tuple[Generated, ...] | None = None


class RunObjective(Objective[Any], Protocol):
    """An objective with its model, its adapter and its data, ready for `execute`."""

    @property
    def model(self) -> nn.Module: ...

    @property
    def handle(self) -> AdaptHandle:
        """The adapter the run trains."""
        ...

    @property
    def data(self) -> DataInfo:
        """The data as the result records it."""
        ...

    @property
    def description(self) -> str:
        """The data in a line, for the run's log."""
        ...

    @property
    def splits(self) -> SplitRecord:
        """The source rows of every split, for the run folder's `splits.json`."""
        ...

    @property
    def trained(self) -> TrainedRun | None:
        """What an analysis reads of the run (None: the task takes no analyses)."""
        ...

    def frozen_replay(self, mode: str, folder: Path | None) -> AbstractContextManager[None]:
        """While inside, training may replay the frozen front's outputs (`FrozenCache`)."""
        ...

    def test(self) -> Tested:
        """Score the trained model on the test split."""
        ...
