"""The report's view of stored runs: small typed `Run`s, and the saved validations.

The report never trains: everything it shows comes from the runs' typed results
(`adaptlab.records.result.RunResult`), which the store has already checked field by field.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from adaptlab.data.builtin import CHRONOLOGICAL
from adaptlab.data.types import TimeSplit
from adaptlab.errors import ConfigError
from adaptlab.records.generated import Generated
from adaptlab.records.harness import HarnessScores
from adaptlab.records.result import EpochRecord, SiteWeights
from adaptlab.records.spec import RunSpec
from adaptlab.records.transfer import ZeroShotScore
from adaptlab.report.adaptation_records import RunForgetting, RunSpectrum
from adaptlab.select.validate import Validation
from adaptlab.study.store_rows import StoredRun
from adaptlab.tasks.classes import ClassCounts
from adaptlab.tasks.registry import get_task

SINGLE_TASK = "single-task"
FUSION = "fusion"
COMBINATION = "combination"
MULTI_TASK = "multi-task"
MULTI_TASK_TRAINING = "multi-task training"
"""How a run came by the adapter it is scored with (`Run.approach`, `approach`)."""
_RUN_ID = re.compile(r"[0-9a-f]{12}")


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


Curve = tuple[tuple[float, ...], tuple[float, ...]]
"""x values and y values of one analysis curve."""


@dataclass(frozen=True)
class Run:
    """What the report uses of one stored run: its metrics by name, so the metric that judges
    (`report.judging`) is chosen afterwards, per data set."""

    run_id: str
    study: str
    setting: Setting
    method: str
    learning_rate: float | None
    seed: int
    task: str
    test: Mapping[str, float]
    dev: Mapping[str, float]
    trainable: int
    total: int
    wall_seconds: float | None
    curve: tuple[EpochRecord, ...]
    versions: tuple[tuple[str, str], ...]
    host: str
    study_metric: str | None = None
    """The `metric:` of the run's study spec, if it gave one."""
    train_counts: Mapping[str, int] | None = None
    test_classes: tuple[ClassCounts, ...] | None = None
    layer_scores: tuple[tuple[str, tuple[float, ...]], ...] = ()
    """(measure, score per layer) from the run's analysis: rsa / cka against its base."""
    landscape: Curve | None = None
    """(alphas, dev losses) from the run's analysis, when it was asked for."""
    fusion: tuple[tuple[str, tuple[float, ...]], ...] = ()
    """A fusion run's mean weight per fused adapter at each fusion layer, bottom to top."""
    zero_shot: tuple[ZeroShotScore, ...] = ()
    """Scores on other data sets' test splits, zero-shot (the study's `zero_shot` targets)."""
    split: Literal["random", "chronological"] = "random"
    """How the run's spec asked its data to be split."""
    time_split: TimeSplit | None = None
    """Where the data was cut into splits by time (None for a random split, and in results
    written before adaptlab stored it)."""
    split_free_spec: str = ""
    """The run's spec as JSON with its data's split left out: runs equal in it differ at most
    in how their data was split."""
    generations: tuple[Generated, ...] = ()
    """A sample of its test generations (generative tasks): prompt, generation, reference."""
    dropped: Mapping[str, int] | None = None
    """Per split, the examples left out because their answer did not fit the maximum length
    (generative tasks; None for the others)."""
    approach: str = SINGLE_TASK
    """How the run came by its adapter (`approach`): trained on its data set, a fusion, a
    combination, a multi-task adapter scored on its data set, or the multi-task training."""
    builds_on: tuple[str, ...] = ()
    """The ids of the runs whose adapters it fuses, stacks on, combines or scores (those kept
    beside the store by its study)."""
    harness: HarnessScores | None = None
    """lm-evaluation-harness scores of its trained model (the study's `harness:`), if any."""
    forgetting: RunForgetting | None = None
    """What it learnt and forgot (the study's `forgetting:`), if measured."""
    spectrum: RunSpectrum | None = None
    """The spectrum of its weight updates (`analysis: [spectrum]`), if measured."""


def approach(spec: RunSpec) -> str:
    """How a run of `spec` comes by the adapter it is scored with."""
    if spec.combine is not None:
        return COMBINATION
    if spec.multi_task_adapter is not None:
        return MULTI_TASK
    if spec.multi_task:
        return MULTI_TASK_TRAINING
    return FUSION if spec.fusion is not None else SINGLE_TASK


def built_on(spec: RunSpec) -> tuple[str, ...]:
    """The ids of the study runs whose folders (`<store>-adapters/<run id>/<name>`) `spec`
    names as adapters to fuse, stack on, combine or score."""
    folders = [*spec.fuse, *spec.stack]
    if spec.combine is not None:
        folders += [source.folder for source in spec.combine.sources]
    if spec.multi_task_adapter is not None:
        folders.append(spec.multi_task_adapter)
    ids = (Path(folder).parent.name for folder in folders)
    return tuple(run_id for run_id in ids if _RUN_ID.fullmatch(run_id))


def read_runs(records: Sequence[StoredRun]) -> list[Run]:
    """All stored runs as `Run`s, in the given order; ConfigError on an empty list or a run
    that lacks what the report needs."""
    if not records:
        raise ConfigError(
            "no result records to report on; run the study first (or check the store)"
        )
    return [read_run(record) for record in records]


def read_run(stored: StoredRun) -> Run:
    """One stored run as a `Run`; ConfigError naming the run and what it lacks."""
    try:
        return _read(stored)
    except (KeyError, TypeError, ValueError) as error:
        raise ConfigError(
            f"result record {stored.run_id} is incomplete or malformed "
            f"({type(error).__name__}: {error}); is it from a finished run of this adaptlab "
            "version?"
        ) from None


def _read(stored: StoredRun) -> Run:
    result = stored.result
    spec = result.spec
    size = spec.train_size
    split, split_free_spec = _split_apart(spec)
    setting = Setting(
        model=spec.model,
        data=_data_name(result.data.name, spec, split, result.data.task),
        train_size=size if size is not None else result.data.sizes["train"],
        full=size is None,
    )
    return Run(
        run_id=stored.run_id,
        study=stored.study,
        setting=setting,
        method=stored.method_label,
        learning_rate=spec.train.learning_rate,
        seed=spec.train.seed,
        task=result.data.task,
        test=result.test,
        dev=result.dev,
        trainable=result.trainable_parameters,
        total=result.total_parameters,
        wall_seconds=result.wall_seconds,
        curve=result.epochs,
        versions=tuple(sorted(result.versions.to_dict().items())),
        host=result.host,
        study_metric=stored.study_metric,
        train_counts=result.data.train_counts,
        test_classes=result.test_classes,
        fusion=_fusion(result.fusion_weights or ()),
        zero_shot=result.zero_shot or (),
        split=split,
        time_split=result.data.time_split,
        split_free_spec=split_free_spec,
        generations=result.generations or (),
        dropped=result.data.dropped,
        approach=approach(spec),
        builds_on=built_on(spec),
        harness=result.harness,
        **_analysis(result.analysis or {}),
    )


def _split_apart(spec: RunSpec) -> tuple[Literal["random", "chronological"], str]:
    """How the spec asks its data to be split, and the spec as JSON without it (a built-in
    split by time by default named by the built-in whose rows it splits)."""
    options = dict(spec.data_options)
    asked = options.pop("split", "random")
    options.pop("time_column", None)
    chronological = asked == "chronological" or spec.data in CHRONOLOGICAL
    rest = {**spec.to_dict(), "data": CHRONOLOGICAL.get(spec.data, spec.data)}
    rest["data_options"] = options
    return ("chronological" if chronological else "random"), json.dumps(rest, sort_keys=True)


def _data_name(name: str, spec: RunSpec, split: str, task: str) -> str:
    """The data set's name, marked when its runs must never be grouped with those of the same
    name: a split option (not the name) made it chronological, or its task marks it (the texts
    of a labelled corpus that trained a masked LM: a language adapter)."""
    marker = get_task(task).data_marker
    if marker is not None:
        name = f"{name} ({marker})"
    marked = split == "chronological" and spec.data not in CHRONOLOGICAL
    return f"{name} (chronological)" if marked else name


def _fusion(sites: Sequence[SiteWeights]) -> tuple[tuple[str, tuple[float, ...]], ...]:
    """(adapter, weight at each site) in the adapters' order, sites bottom to top."""
    ordered = sorted(sites, key=lambda site: site.block)
    adapters = list(dict.fromkeys(name for site in ordered for name in site.weights))
    return tuple((name, tuple(site.weights[name] for site in ordered)) for name in adapters)


def _analysis(analysis: Mapping[str, Any]) -> dict[str, Any]:
    """The `Run` fields of a result's analysis (study keys `analysis: [rsa, landscape,
    spectrum]` and `forgetting:`)."""
    scores = tuple(
        (name, tuple(float(row["score"]) for row in result["layers"]))
        for name, result in analysis.items()
        if name not in NOT_LAYER_SCORES
    )
    curve = analysis.get("landscape")
    landscape = None
    if curve is not None:
        landscape = (tuple(map(float, curve["alphas"])), tuple(map(float, curve["losses"])))
    spectrum, forgetting = analysis.get("spectrum"), analysis.get("forgetting")
    return {
        "layer_scores": scores,
        "landscape": landscape,
        "spectrum": None if spectrum is None else RunSpectrum.of(spectrum),
        "forgetting": None if forgetting is None else RunForgetting.of(forgetting),
    }


@dataclass(frozen=True)
class RunGroup:
    """A method's runs (seeds) shown under one label: a setting's, or the method's own at one
    learning rate."""

    label: str
    method: str
    runs: tuple[Run, ...]


NOT_LAYER_SCORES = ("landscape", "spectrum", "forgetting")
"""The analyses whose results are no per-layer similarity."""


@dataclass(frozen=True)
class SavedValidation:
    """What `adaptlab rank --validate` saved in the store for one data set and `kind` of
    candidates ("models" or "layers")."""

    kind: str
    validation: Validation


def read_validations(saved: Sequence[Mapping[str, Any]]) -> list[SavedValidation]:
    """The store's saved validations, typed; ConfigError on a malformed one."""
    try:
        return [SavedValidation(str(item["kind"]), Validation.from_dict(item)) for item in saved]
    except (KeyError, TypeError, ValueError) as error:
        raise ConfigError(
            f"a saved transferability validation is malformed ({type(error).__name__}: {error}); "
            "run `adaptlab rank ... --validate STORE` again"
        ) from None
