"""What a finished sequence produced: the score matrix, per-stage training records, scores."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from adaptlab.train.continual.metrics import ContinualScores
from adaptlab.train.continual.spec import SequenceSpec
from adaptlab.train.result import EpochRecord, Versions


@dataclass(frozen=True)
class StageRecord:
    """One stage's training: its data, epochs, best epoch, trainable tensors and time."""

    name: str
    labels: tuple[str, ...]
    sizes: Mapping[str, int]
    epochs: tuple[EpochRecord, ...]
    best_epoch: int
    trainable_parameters: int
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "labels": list(self.labels),
            "sizes": dict(self.sizes),
            "epochs": [epoch.to_dict() for epoch in self.epochs],
            "best_epoch": self.best_epoch,
            "trainable_parameters": self.trainable_parameters,
            "seconds": self.seconds,
        }


@dataclass(frozen=True)
class SequenceResult:
    """A sequence's outcome. `matrix[i][j]` is the `metric` score on stage j's test set after
    training stage i; `tests[i][j]` holds every test metric of that cell and the mean test
    loss; `single_stage[j]` is stage j trained alone (stage 0's is `matrix[0][0]`), when asked
    for."""

    spec: SequenceSpec
    stages: tuple[StageRecord, ...]
    metric: str
    matrix: tuple[tuple[float, ...], ...]
    tests: tuple[tuple[Mapping[str, float], ...], ...]
    scores: ContinualScores
    versions: Versions
    single_stage: tuple[float, ...] | None = None
    wall_seconds: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "spec": self.spec.to_dict(),
            "stages": [stage.to_dict() for stage in self.stages],
            "metric": self.metric,
            "matrix": [list(row) for row in self.matrix],
            "tests": [[dict(cell) for cell in row] for row in self.tests],
            "single_stage": None if self.single_stage is None else list(self.single_stage),
            "scores": self.scores.to_dict(),
            "versions": self.versions.to_dict(),
            "wall_seconds": self.wall_seconds,
        }
