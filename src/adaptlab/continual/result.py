"""What a finished sequence produced: the score matrix, per-stage training records, scores."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from adaptlab.continual.metrics import ContinualScores, stored_scores, summarize
from adaptlab.continual.spec import SequenceSpec
from adaptlab.errors import ConfigError
from adaptlab.records.jsonfields import JsonObject
from adaptlab.records.result import EpochRecord
from adaptlab.records.threads import ThreadUse
from adaptlab.records.versions import Versions


@dataclass(frozen=True)
class StageRecord:
    """One stage's training: its data, epochs, best epoch, trainable tensors and time.
    `dropped`: per split, the examples left out because their answer does not fit (sft and
    chat stages; written only where given)."""

    name: str
    labels: tuple[str, ...]
    sizes: Mapping[str, int]
    epochs: tuple[EpochRecord, ...]
    best_epoch: int
    trainable_parameters: int
    seconds: float
    dropped: Mapping[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "labels": list(self.labels),
            "sizes": dict(self.sizes),
            **({"dropped": dict(self.dropped)} if self.dropped else {}),
            "epochs": [epoch.to_dict() for epoch in self.epochs],
            "best_epoch": self.best_epoch,
            "trainable_parameters": self.trainable_parameters,
            "seconds": self.seconds,
        }

    @classmethod
    def from_json(cls, row: JsonObject) -> StageRecord:
        row.refuse_unknown(
            (
                "name",
                "labels",
                "sizes",
                "dropped",
                "epochs",
                "best_epoch",
                "trainable_parameters",
                "seconds",
            )
        )
        epochs = tuple(EpochRecord.from_json(epoch) for epoch in row.objects("epochs"))
        best_epoch = row.integer("best_epoch")
        if not 1 <= best_epoch <= len(epochs):
            raise ConfigError(f"{row.where}: {row.prefix}best_epoch {best_epoch} is no epoch")
        return cls(
            name=row.text("name"),
            labels=row.texts("labels"),
            sizes=row.integers("sizes"),
            epochs=epochs,
            best_epoch=best_epoch,
            trainable_parameters=row.integer("trainable_parameters"),
            seconds=row.number("seconds"),
            dropped=row.integers("dropped", {}),
        )


@dataclass(frozen=True)
class StageOutcome:
    """A trained stage: its training record and its row of the matrix, `tests[j]` holding every
    test metric (and the mean test loss) on stage j's test set after this stage."""

    record: StageRecord
    tests: tuple[Mapping[str, float], ...]

    def row(self, metric: str) -> tuple[float, ...]:
        """The stage's row of the matrix: `metric` on every stage's test set."""
        return tuple(cell[metric] for cell in self.tests)

    def to_dict(self) -> dict[str, Any]:
        return {"record": self.record.to_dict(), "tests": [dict(cell) for cell in self.tests]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], where: str = "stage") -> StageOutcome:
        """A stage from its JSON form; ConfigError naming the first bad field."""
        row = JsonObject(data, where)
        row.refuse_unknown(("record", "tests"))
        tests = row.data.get("tests")
        if not isinstance(tests, list):
            raise ConfigError(f"{where}: tests: expected a list")
        return cls(
            record=StageRecord.from_json(row.object("record")),
            tests=tuple(_cell(tests, index, where) for index in range(len(tests))),
        )


def _cell(tests: list[Any], index: int, where: str) -> dict[str, float]:
    return JsonObject({"cell": tests[index]}, where, f"tests[{index}].").numbers("cell")


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
    threads: ThreadUse | None = None
    """The CPU threads the sequence computed with (None in records written before they were
    kept)."""

    def to_dict(self) -> dict[str, Any]:
        threads = {} if self.threads is None else {"threads": self.threads.to_dict()}
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
            **threads,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], where: str = "sequence") -> SequenceResult:
        """A result from its JSON form (the scores are computed again from the matrix);
        ConfigError naming the first bad field."""
        result = JsonObject(data, where)
        result.refuse_unknown(
            (
                "spec",
                "stages",
                "metric",
                "matrix",
                "tests",
                "single_stage",
                "scores",
                "versions",
                "wall_seconds",
                "threads",
            )
        )
        metric = result.text("metric")
        outcomes = [
            StageOutcome.from_dict(
                {"record": record.data, "tests": tests}, f"{where}: stages[{index}]"
            )
            for index, (record, tests) in enumerate(
                zip(result.objects("stages"), _list(result, "tests"), strict=True)
            )
        ]
        matrix = tuple(outcome.row(metric) for outcome in outcomes)
        single = None
        if result.data.get("single_stage") is not None:
            values = _list(result, "single_stage")
            if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
                raise ConfigError(f"{where}: single_stage: expected a list of numbers")
            single = tuple(float(value) for value in values)
        return cls(
            spec=SequenceSpec.from_json(result.object("spec")),
            stages=tuple(outcome.record for outcome in outcomes),
            metric=metric,
            matrix=matrix,
            tests=tuple(outcome.tests for outcome in outcomes),
            scores=stored_scores(matrix, single, metric),
            versions=Versions.from_json(result.object("versions")),
            single_stage=single,
            wall_seconds=result.optional_number("wall_seconds"),
            threads=ThreadUse.from_json(result.object("threads")) if "threads" in result else None,
        )


def sequence_result(spec: SequenceSpec, outcomes: list[StageOutcome]) -> SequenceResult:
    """The result of `spec`'s finished stages, its matrix (of `spec.metric`) summarised."""
    metric = spec.metric
    matrix = tuple(outcome.row(metric) for outcome in outcomes)
    return SequenceResult(
        spec=spec,
        stages=tuple(outcome.record for outcome in outcomes),
        metric=metric,
        matrix=matrix,
        tests=tuple(outcome.tests for outcome in outcomes),
        scores=summarize(matrix, metric=metric),
        versions=Versions.current(),
        threads=ThreadUse.current(),
    )


def _list(result: JsonObject, key: str) -> list[Any]:
    value = result.data.get(key)
    if not isinstance(value, list):
        raise ConfigError(f"{result.where}: {key}: expected a list, got {value!r}")
    return value
