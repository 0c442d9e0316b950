"""What a finished run produced, as typed records: the study store's rows and `metrics.json`.

`RunResult.to_dict()` writes the JSON form adaptlab has always written; `from_dict` reads it
back, accepting rows written before a field existed (the field takes its "unknown" value) and
refusing, in one line naming the field, a value of the wrong type or one no run measures: a
finite score outside its metric's range (`adaptlab.records.metric_ranges`), a training loss or
a time that is not finite, a count, step or size below 0. A score or loss measured on data may
be NaN or infinite: the run diverged, and the report shows it so.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from adaptlab.data.types import Period, TimeSplit
from adaptlab.errors import ConfigError
from adaptlab.records.generated import Generated
from adaptlab.records.harness import HarnessScores
from adaptlab.records.jsonfields import FINITE, NOT_NEGATIVE, JsonObject
from adaptlab.records.metric_ranges import UNIT, metric_range
from adaptlab.records.spec import RunSpec
from adaptlab.records.threads import ThreadUse
from adaptlab.records.transfer import ZeroShotScore
from adaptlab.records.versions import Versions
from adaptlab.tasks.classes import ClassCounts
from adaptlab.tasks.judging import MetricChoice
from adaptlab.tasks.registry import known_task, task_names


@dataclass(frozen=True)
class EpochRecord:
    """One epoch: where it ended, its mean training loss and its dev scores."""

    epoch: int
    step: int
    train_loss: float
    dev_loss: float
    dev_metrics: Mapping[str, float]
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "epoch": self.epoch,
            "step": self.step,
            "train_loss": self.train_loss,
            "dev_loss": self.dev_loss,
            "dev_metrics": dict(self.dev_metrics),
            "seconds": self.seconds,
        }

    @classmethod
    def from_json(cls, row: JsonObject) -> EpochRecord:
        row.refuse_unknown(("epoch", "step", "train_loss", "dev_loss", "dev_metrics", "seconds"))
        return cls(
            epoch=row.integer("epoch", least=1),
            step=row.integer("step", least=0),
            train_loss=row.number("train_loss", within=FINITE),
            dev_loss=row.number("dev_loss"),
            dev_metrics=row.numbers("dev_metrics", within=metric_range, diverged=True),
            seconds=row.number("seconds", within=NOT_NEGATIVE),
        )


@dataclass(frozen=True)
class DataInfo:
    """The data a run saw: data set name, task, label names, the size of each split, the
    examples per class of its training sample (None for regression, and in results written
    before adaptlab recorded them) and, for data split by time, where the splits were cut."""

    name: str
    task: str
    labels: tuple[str, ...]
    sizes: Mapping[str, int]
    train_counts: Mapping[str, int] | None = None
    time_split: TimeSplit | None = None
    dropped: Mapping[str, int] | None = None
    """Per split, the examples left out because their answer did not fit the maximum length
    (generative tasks; None for the others)."""

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "name": self.name,
            "task": self.task,
            "labels": list(self.labels),
            "sizes": dict(self.sizes),
        }
        if self.train_counts is not None:
            data["train_counts"] = dict(self.train_counts)
        if self.time_split is not None:
            data["time_split"] = {
                "column": self.time_split.column,
                "periods": [
                    {"split": p.split, "first": p.first, "last": p.last}
                    for p in self.time_split.periods
                ],
            }
        if self.dropped is not None:
            data["dropped"] = dict(self.dropped)
        return data

    @classmethod
    def from_json(cls, data: JsonObject) -> DataInfo:
        data.refuse_unknown(
            ("name", "task", "labels", "sizes", "train_counts", "time_split", "dropped")
        )
        task = data.text("task")
        if not known_task(task):
            raise ConfigError(
                f"{data.where}: {data.prefix}task: expected one of {', '.join(task_names())}, "
                f"got {task!r}"
            )
        return cls(
            name=data.text("name"),
            task=task,
            labels=data.texts("labels"),
            sizes=data.integers("sizes", least=0),
            train_counts=data.integers("train_counts", least=0) if "train_counts" in data else None,
            time_split=_time_split(data.object("time_split")) if "time_split" in data else None,
            dropped=data.integers("dropped", least=0) if "dropped" in data else None,
        )


def _time_split(found: JsonObject) -> TimeSplit:
    """The stored cut dates of data split by time."""
    found.refuse_unknown(("column", "periods"))
    periods = found.objects("periods")
    for period in periods:
        period.refuse_unknown(("split", "first", "last"))
    return TimeSplit(
        column=found.text("column"),
        periods=tuple(Period(p.text("split"), p.text("first"), p.text("last")) for p in periods),
    )


@dataclass(frozen=True)
class SiteWeights:
    """The mean fusion weight of each adapter at one site (a block's sub-layer output)."""

    site: str
    block: int
    role: str
    weights: Mapping[str, float]

    def to_dict(self) -> dict[str, Any]:
        return {
            "site": self.site,
            "block": self.block,
            "role": self.role,
            "weights": dict(self.weights),
        }

    @classmethod
    def from_json(cls, row: JsonObject) -> SiteWeights:
        row.refuse_unknown(("site", "block", "role", "weights"))
        return cls(
            row.text("site"),
            row.integer("block", least=0),
            row.text("role"),
            row.numbers("weights", within=UNIT, diverged=True),  # a softmax's shares
        )


@dataclass(frozen=True)
class RunResult:
    """One finished run: its spec, data, per-epoch dev scores, the best epoch's dev and test
    metrics, parameter counts, sizes, time, memory and provenance.

    `metric` is the task's primary metric, which picked the best epoch on dev. It need not be
    the metric that judges the run: `judged_by` holds that one and why (the default rule of
    `adaptlab.tasks.judging` on the run's training sample, which a study's `metric:` or a
    report's `--metric` overrides; None in results written before adaptlab recorded it).
    `test_classes` holds per-class test counts (None for regression, and in results written
    before adaptlab recorded them). A run that trains nothing (`RunSpec.trains_nothing`: a
    combination or a multi-task adapter scored as it is) has no epochs and `best_epoch` 0; its
    `dev` is its adapter's dev score; a combination counts no trainable parameters, a
    multi-task adapter its own (trained once for all its data sets). `analysis` holds what
    the analyses a study asked for found (JSON, read by the report), else None.
    """

    spec: RunSpec
    data: DataInfo
    metric: str
    epochs: tuple[EpochRecord, ...]
    best_epoch: int
    dev: Mapping[str, float]
    test: Mapping[str, float]
    test_loss: float
    trainable_parameters: int
    total_parameters: int
    parameter_groups: Mapping[str, int]
    adapter_tensor_bytes: int | None
    peak_memory_bytes: int | None
    versions: Versions
    host: str
    adapter_bytes: int | None = None
    wall_seconds: float | None = None
    test_classes: tuple[ClassCounts, ...] | None = None
    analysis: Mapping[str, Any] | None = None
    fusion_weights: tuple[SiteWeights, ...] | None = None
    """For a fusion run: each fusion layer's mean weight per adapter on the dev set."""
    zero_shot: tuple[ZeroShotScore, ...] | None = None
    generations: tuple[Generated, ...] | None = None
    """A sample of the test's generated answers (generative tasks)."""
    """Scores on the spec's zero-shot targets (test splits of other data sets)."""
    judged_by: MetricChoice | None = None
    harness: HarnessScores | None = None
    """lm-evaluation-harness scores of the trained model (a study's `harness:`), else None."""
    threads: ThreadUse | None = None
    """The CPU threads the run computed with (None in records written before they were kept)."""

    @property
    def best(self) -> EpochRecord:
        """The epoch whose weights the run kept (a run that trains nothing has none)."""
        return self.epochs[self.best_epoch - 1]

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (key order as adaptlab has always written it)."""
        judged = self.judged_by
        result: dict[str, Any] = {
            "spec": self.spec.to_dict(),
            "data": self.data.to_dict(),
            "metric": self.metric,
            **({} if judged is None else {"judged_by": _judgement(judged)}),
            "epochs": [epoch.to_dict() for epoch in self.epochs],
            "best_epoch": self.best_epoch,
            "dev": dict(self.dev),
            "test": dict(self.test),
            **({} if self.test_classes is None else {"test_classes": self._classes()}),
            "test_loss": self.test_loss,
            "trainable_parameters": self.trainable_parameters,
            "total_parameters": self.total_parameters,
            "parameter_groups": dict(self.parameter_groups),
            "adapter_bytes": self.adapter_bytes,
            "adapter_tensor_bytes": self.adapter_tensor_bytes,
            "wall_seconds": self.wall_seconds,
            "peak_memory_bytes": self.peak_memory_bytes,
            "versions": self.versions.to_dict(),
            "host": self.host,
        }
        if self.threads is not None:
            result["threads"] = self.threads.to_dict()
        if self.analysis is not None:
            result["analysis"] = dict(self.analysis)
        if self.fusion_weights is not None:
            result["fusion_weights"] = [site.to_dict() for site in self.fusion_weights]
        if self.zero_shot is not None:
            result["zero_shot"] = [score.to_dict() for score in self.zero_shot]
        if self.generations is not None:
            result["generations"] = [generated.to_dict() for generated in self.generations]
        if self.harness is not None:
            result["harness"] = self.harness.to_dict()
        return result

    def _classes(self) -> list[dict[str, object]]:
        return [counts.to_dict() for counts in self.test_classes or ()]

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], where: str = "result") -> RunResult:
        """A result from its JSON form; ConfigError naming the first bad field."""
        result = JsonObject(data, where)
        result.refuse_unknown(_FIELDS)
        epochs = tuple(EpochRecord.from_json(row) for row in result.objects("epochs"))
        best_epoch = result.integer("best_epoch", least=0)
        if not 1 <= best_epoch <= len(epochs) and (best_epoch, epochs) != (0, ()):
            raise ConfigError(f"{where}: best_epoch {best_epoch} is not one of its epochs")
        analysis = result.mapping("analysis") if "analysis" in result else None
        classes = None
        if "test_classes" in result:
            classes = tuple(_class_counts(row) for row in result.objects("test_classes"))
        return cls(
            spec=RunSpec.from_json(result.object("spec")),
            data=DataInfo.from_json(result.object("data")),
            metric=result.text("metric"),
            judged_by=_judged(result.object("judged_by")) if "judged_by" in result else None,
            epochs=epochs,
            best_epoch=best_epoch,
            dev=result.numbers("dev", within=metric_range, diverged=True),
            test=result.numbers("test", within=metric_range, diverged=True),
            test_loss=result.number("test_loss"),
            trainable_parameters=result.integer("trainable_parameters", least=0),
            total_parameters=result.integer("total_parameters", least=0),
            parameter_groups=result.integers("parameter_groups", least=0),
            adapter_bytes=result.optional_integer("adapter_bytes", least=0),
            adapter_tensor_bytes=result.optional_integer("adapter_tensor_bytes", least=0),
            wall_seconds=result.optional_number("wall_seconds", within=NOT_NEGATIVE),
            peak_memory_bytes=result.optional_integer("peak_memory_bytes", least=0),
            versions=Versions.from_json(result.object("versions")),
            host=result.text("host"),
            test_classes=classes,
            analysis=analysis,
            fusion_weights=(
                tuple(SiteWeights.from_json(row) for row in result.objects("fusion_weights"))
                if "fusion_weights" in result
                else None
            ),
            zero_shot=(
                tuple(ZeroShotScore.from_json(row) for row in result.objects("zero_shot"))
                if "zero_shot" in result
                else None
            ),
            generations=(
                tuple(Generated.from_json(row) for row in result.objects("generations"))
                if "generations" in result
                else None
            ),
            harness=(
                HarnessScores.from_json(result.object("harness")) if "harness" in result else None
            ),
            threads=ThreadUse.from_json(result.object("threads")) if "threads" in result else None,
        )


_FIELDS = (
    "spec",
    "data",
    "metric",
    "judged_by",
    "epochs",
    "best_epoch",
    "dev",
    "test",
    "test_classes",
    "test_loss",
    "trainable_parameters",
    "total_parameters",
    "parameter_groups",
    "adapter_bytes",
    "adapter_tensor_bytes",
    "wall_seconds",
    "peak_memory_bytes",
    "versions",
    "host",
    "threads",
    "analysis",
    "fusion_weights",
    "zero_shot",
    "generations",
    "harness",
)


def _judgement(judged: MetricChoice) -> dict[str, str]:
    """The JSON form of the metric a run is judged by, and why."""
    return {"metric": judged.metric, "reason": judged.reason}


def _judged(judged: JsonObject) -> MetricChoice:
    """The stored metric a run is judged by, and why."""
    judged.refuse_unknown(("metric", "reason"))
    return MetricChoice(judged.text("metric"), judged.text("reason"))


def _class_counts(row: JsonObject) -> ClassCounts:
    row.refuse_unknown(("label", "support", "predicted", "correct"))
    return ClassCounts(
        label=row.text("label"),
        support=row.integer("support", least=0),
        predicted=row.integer("predicted", least=0),
        correct=row.integer("correct", least=0),
    )


def read_result(path: str | os.PathLike[str]) -> RunResult:
    """The result a run folder's `metrics.json` holds; ConfigError on a bad file."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ConfigError(f"cannot read run result {path}: {error}") from None
    return RunResult.from_dict(data, where=str(path))
