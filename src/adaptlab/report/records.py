"""Read result records (one dict per finished run) into small typed `Run`s, checking the contract.

The report never trains: everything it shows comes from these fields. A record that lacks one
ends in a `ConfigError` naming the run and the field, so a half-written store fails clearly.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from adaptlab.errors import ConfigError


@dataclass(frozen=True)
class Setting:
    """What runs must share to be compared: model, data set and number of training examples."""

    model: str
    data: str
    train_size: int
    full: bool  # True when the whole training split was used (spec train_size None)

    def label(self, with_model: bool) -> str:
        """A short human name such as `sst2 · 1000 examples`."""
        size = f"full ({self.train_size} examples)" if self.full else f"{self.train_size} examples"
        text = f"{self.data} · {size}"
        return f"{text} · {self.model}" if with_model else text


@dataclass(frozen=True)
class CurvePoint:
    """Dev loss and dev primary metric at the end of one epoch."""

    step: int
    dev_loss: float
    dev_metric: float


Curve = tuple[tuple[float, ...], tuple[float, ...]]
"""x values and y values of one analysis curve."""


@dataclass(frozen=True)
class Run:
    """The fields of one record the report uses."""

    run_id: str
    study: str
    setting: Setting
    method: str
    learning_rate: float | None
    seed: int | None
    metric: str
    test: float
    dev: float | None
    trainable: int
    total: int
    wall_seconds: float | None
    curve: tuple[CurvePoint, ...]
    versions: tuple[tuple[str, str], ...]
    host: str
    layer_scores: tuple[tuple[str, tuple[float, ...]], ...] = ()
    """(measure, score per layer) from the run's analysis: rsa / cka against its base."""
    landscape: Curve | None = None
    """(alphas, dev losses) from the run's analysis, when it was asked for."""


def read_runs(records: Sequence[Mapping[str, Any]]) -> list[Run]:
    """All records as `Run`s, in the given order; ConfigError on an empty list or a bad record."""
    if not records:
        raise ConfigError(
            "no result records to report on; run the study first (or check the store)"
        )
    return [read_run(record, index) for index, record in enumerate(records)]


def read_run(record: Mapping[str, Any], index: int = 0) -> Run:
    """One record as a `Run`; ConfigError naming the run and the field when one is missing."""
    name = str(record.get("run_id", f"#{index + 1}"))
    try:
        return _read(record)
    except (KeyError, TypeError, ValueError) as error:
        raise ConfigError(
            f"result record {name} is incomplete or malformed ({type(error).__name__}: {error}); "
            "is it from a finished run of this adaptlab version?"
        ) from None


def _read(record: Mapping[str, Any]) -> Run:
    spec, data, metric = record["spec"], record["data"], str(record["metric"])
    train = spec["train"]
    size = spec.get("train_size")
    setting = Setting(
        model=str(spec["model"]),
        data=str(data["name"]),
        train_size=int(size if size is not None else data["sizes"]["train"]),
        full=size is None,
    )
    dev = record.get("dev") or {}
    rate = train.get("learning_rate")
    seed = train.get("seed")
    wall = record.get("wall_seconds")
    return Run(
        run_id=str(record["run_id"]),
        study=str(record.get("study", "")),
        setting=setting,
        method=str(record["method_label"]),
        learning_rate=float(rate) if rate is not None else None,
        seed=int(seed) if seed is not None else None,
        metric=metric,
        test=float(record["test"][metric]),
        dev=float(dev[metric]) if metric in dev else None,
        trainable=int(record["trainable_parameters"]),
        total=int(record["total_parameters"]),
        wall_seconds=float(wall) if wall is not None else None,
        curve=tuple(_point(epoch, metric) for epoch in record.get("epochs") or ()),
        versions=tuple(sorted((str(k), str(v)) for k, v in (record.get("versions") or {}).items())),
        host=str(record.get("host", "")),
        **_analysis(record.get("analysis") or {}),
    )


def _analysis(analysis: Mapping[str, Any]) -> dict[str, Any]:
    """The `Run` fields of a record's "analysis" (study key `analysis: [rsa, landscape]`)."""
    scores = tuple(
        (name, tuple(float(row["score"]) for row in result["layers"]))
        for name, result in analysis.items()
        if name != "landscape"
    )
    curve = analysis.get("landscape")
    landscape = None
    if curve is not None:
        landscape = (tuple(map(float, curve["alphas"])), tuple(map(float, curve["losses"])))
    return {"layer_scores": scores, "landscape": landscape}


def _point(epoch: Mapping[str, Any], metric: str) -> CurvePoint:
    return CurvePoint(
        step=int(epoch["step"]),
        dev_loss=float(epoch["dev_loss"]),
        dev_metric=float(epoch["dev_metrics"][metric]),
    )


@dataclass(frozen=True)
class Agreement:
    """One estimator's correlations with the fine-tuned scores (None where undefined)."""

    estimator: str
    kendall_tau: float | None
    weighted_tau: float | None
    pearson: float | None
    candidates: int


@dataclass(frozen=True)
class Validation:
    """What `adaptlab rank --validate` saved in the store for one data set and kind."""

    data: str
    kind: str  # "models" or "layers"
    estimators: tuple[str, ...]
    candidates: tuple[tuple[str, float, tuple[float, ...]], ...]
    """(candidate, fine-tuned test score, its score per estimator), best fine-tuned first."""
    agreements: tuple[Agreement, ...]


def read_validations(saved: Sequence[Mapping[str, Any]]) -> list[Validation]:
    """The store's saved validations as `Validation`s; ConfigError on a malformed one."""
    try:
        return [_validation(item) for item in saved]
    except (KeyError, TypeError, ValueError) as error:
        raise ConfigError(
            f"a saved transferability validation is malformed ({type(error).__name__}: {error}); "
            "run `adaptlab rank ... --validate STORE` again"
        ) from None


def _validation(item: Mapping[str, Any]) -> Validation:
    agreements = tuple(
        Agreement(
            estimator=str(name),
            kendall_tau=_optional(found["kendall_tau"]),
            weighted_tau=_optional(found["weighted_tau"]),
            pearson=_optional(found["pearson"]),
            candidates=int(found["candidates"]),
        )
        for name, found in item["estimators"].items()
    )
    estimators = tuple(a.estimator for a in agreements)
    rows = [
        (
            str(item["candidates"][key]),
            float(score),
            tuple(float(item["scores"][key][name]) for name in estimators),
        )
        for key, score in item["fine_tuned"].items()
    ]
    return Validation(
        data=str(item["data"]),
        kind=str(item["kind"]),
        estimators=estimators,
        candidates=tuple(sorted(rows, key=lambda row: -row[1])),
        agreements=agreements,
    )


def _optional(value: Any) -> float | None:
    return None if value is None else float(value)
