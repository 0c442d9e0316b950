"""Expand a study spec into its list of runs, each with a stable id.

The order is seeds (outermost), models, data, train sizes, methods, learning rates, so a study
stopped half-way already holds every method compared on the first seeds. A run's id is a
hash of its fully resolved `RunSpec` (methods with every option, learning rate, seed, ...):
the same run planned by any study or any process gets the same id, and a finished id is never
run again.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from dataclasses import dataclass
from pathlib import Path

from adaptlab.data import builtin_datasets
from adaptlab.data.identity import content_digest
from adaptlab.errors import ConfigError
from adaptlab.models.builtin import BUILTIN_MODELS
from adaptlab.study.analysis import AnalysisRequest
from adaptlab.study.spec import StudySpec
from adaptlab.train.config import TrainConfig
from adaptlab.train.run import RunSpec


@dataclass(frozen=True)
class PlannedRun:
    """One cell of the grid: its id, study, method label, the spec `execute` gets, the
    analyses to run on the trained model and the hash of its data file's contents (neither is
    part of the id: asking for analyses later does not re-train runs already done, and a data
    file edited in place is found by comparing hashes, see `study.runner`)."""

    run_id: str
    study: str
    method_label: str
    spec: RunSpec
    analysis: AnalysisRequest = AnalysisRequest()
    data_digest: str | None = None

    def describe(self) -> str:
        """A short human line: method · data · size · seed · learning rate · model."""
        size = "all" if self.spec.train_size is None else f"{self.spec.train_size:,}"
        return (
            f"{self.method_label} · {Path(self.spec.data).name} · {size} ex · "
            f"seed {self.spec.train.seed} · lr {self.spec.learning_rate():g} · "
            f"{Path(self.spec.model).name}"
        )


def run_id(spec: RunSpec) -> str:
    """12 hex digits of the SHA-256 of the resolved spec as canonical JSON."""
    text = json.dumps(spec.to_dict(), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def plan_study(spec: StudySpec, base: Path) -> list[PlannedRun]:
    """Every run of `spec`; relative model and data paths are read from `base` (spec folder)."""
    models = [_local(model, base, set(BUILTIN_MODELS)) for model in spec.models]
    data = [(_local(d.source, base, set(builtin_datasets())), d.options) for d in spec.data]
    digests = {source: content_digest(source) for source, _ in data}
    runs: list[PlannedRun] = []
    seen: dict[str, PlannedRun] = {}
    analysis = AnalysisRequest(tuple(spec.analysis), spec.analysis_tokens)
    grid = itertools.product(spec.seeds, models, data, spec.train_sizes, spec.methods)
    for seed, model, (source, options), size, entry in grid:
        rates = entry.learning_rates or spec.learning_rates
        for rate in [None] if isinstance(rates, str) else rates:
            train = TrainConfig(
                epochs=entry.epochs or spec.epochs,
                batch_size=entry.batch_size or spec.batch_size,
                learning_rate=rate,
                max_length=spec.max_length,
                seed=seed,
            )
            run_spec = RunSpec.build(
                model,
                source,
                entry.run_method(),
                train_size=size,
                train=train,
                data_options=options.as_kwargs(),
                device=spec.device,
            )
            planned = PlannedRun(
                run_id(run_spec),
                spec.name,
                entry.display_label,
                run_spec,
                analysis,
                digests[source],
            )
            twin = seen.setdefault(planned.run_id, planned)
            if twin is not planned:
                raise ConfigError(
                    f"study {spec.name}: runs '{twin.describe()}' and '{planned.describe()}' "
                    "have identical settings; remove one of the two methods (or models, data)"
                )
            runs.append(planned)
    return runs


def _local(value: str, base: Path, builtin: set[str]) -> str:
    """An absolute path when `value` names a file or folder beside the spec, else `value`."""
    if value in builtin or value.startswith("hf:"):
        return value
    path = (base / Path(value).expanduser()).resolve()
    return str(path) if path.exists() else value
