"""Expand a study spec into its list of runs, each with a stable id.

The order is seeds (outermost), models, data, train sizes, methods, learning rates, so a study
stopped half-way already holds every method compared on the first seeds. A run's id is a
hash of its fully resolved `RunSpec` (methods with every option, learning rate, seed, ...):
the same run planned by any study or any process gets the same id, and a finished id is never
run again.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import json
from dataclasses import dataclass, replace
from pathlib import Path

from adaptlab.data.builtin import builtin_datasets
from adaptlab.data.identity import content_digest
from adaptlab.engine.adapters import as_adapter_name
from adaptlab.errors import ConfigError
from adaptlab.integrations.trackers.choice import Tracking
from adaptlab.models.builtin import BUILTIN_MODELS
from adaptlab.records.config import TrainConfig
from adaptlab.records.spec import RunSpec
from adaptlab.records.transfer import ZeroShotTarget
from adaptlab.study.analysis import AnalysisRequest
from adaptlab.study.spec import StudySpec
from adaptlab.study.spec_methods import MethodEntry

RUN_REFERENCE = "run:"
"""How a spec names the folder of another run of the study: run:<run id>/<adapter name>."""


@dataclass(frozen=True)
class PlannedRun:
    """One cell of the grid: its id, study, method label, the spec `execute` gets, the
    analyses to run on the trained model and the hash of its data file's contents (neither is
    part of the id: asking for analyses later does not re-train runs already done, and a data
    file edited in place is found by comparing hashes, see `study.runner`).

    `needs`: runs whose adapter folders this run builds on (its spec names them as
    run:<id>); `keep`: other runs build on this one, so its folder is written. `out` is
    where the folder goes, and `tracking` where the run reports (`report_to:`), both set by
    the runner.
    """

    run_id: str
    study: str
    method_label: str
    spec: RunSpec
    analysis: AnalysisRequest = AnalysisRequest()
    needs: tuple[str, ...] = ()
    keep: bool = False
    out: str | None = None
    data_digest: str | None = None
    tracking: Tracking | None = None

    def describe(self) -> str:
        """A short human line: method · data · size · seed · learning rate · model."""
        size = "all" if self.spec.train_size is None else f"{self.spec.train_size:,}"
        return (
            f"{self.method_label} · {Path(self.spec.data).name} · {size} ex · "
            f"seed {self.spec.train.seed} · lr {self.spec.learning_rate():g} · "
            f"{Path(self.spec.model).name}"
        )

    def placed(self, folders: Path) -> PlannedRun:
        """This run with its references made folders under `folders` (and its own, if kept)."""

        def folder(reference: str) -> str:
            if reference.startswith(RUN_REFERENCE):
                return str(folders / reference.removeprefix(RUN_REFERENCE))
            return reference

        spec = replace(
            self.spec,
            fuse=tuple(map(folder, self.spec.fuse)),
            stack=tuple(map(folder, self.spec.stack)),
            zero_shot=tuple(
                replace(t, stack_swap=tuple((name, folder(ref)) for name, ref in t.stack_swap))
                for t in self.spec.zero_shot
            ),
        )
        out = str(folders / self.run_id / as_adapter_name(self.method_label)) if self.keep else None
        return replace(self, spec=spec, out=out)


def run_id(spec: RunSpec) -> str:
    """12 hex digits of the SHA-256 of the resolved spec as canonical JSON."""
    text = json.dumps(spec.to_dict(), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def plan_study(spec: StudySpec, base: Path) -> list[PlannedRun]:
    """Every run of `spec`; relative model and data paths are read from `base` (spec folder).

    Sources come first (once per model), then the grid; in each cell a method that fuses or
    stacks on other methods' adapters comes after them.
    """
    _check_swaps(spec)
    models = [_local(model, base, set(BUILTIN_MODELS)) for model in spec.models]
    data = [(_local(d.source, base, set(builtin_datasets())), d.options) for d in spec.data]
    digest = functools.cache(content_digest)  # each data file hashed once
    analysis = AnalysisRequest(tuple(spec.analysis), spec.analysis_tokens)
    runs: list[PlannedRun] = []
    sources: dict[tuple[str, str], PlannedRun] = {}
    for model in models:
        for source in spec.sources:
            train = TrainConfig(
                epochs=source.epochs or spec.epochs,
                batch_size=source.batch_size or spec.batch_size,
                learning_rate=source.learning_rate,
                max_length=spec.max_length,
                seed=spec.seeds[0] if source.seed is None else source.seed,
            )
            run_spec = RunSpec.build(
                model,
                _local(source.data.source, base, set(builtin_datasets())),
                source.run_method(),
                train_size=source.train_size,
                train=train,
                data_options=source.data.options.as_kwargs(),
                device=spec.device,
                scale=spec.scale,
            )
            planned = PlannedRun(
                run_id(run_spec),
                spec.name,
                source.label,
                run_spec,
                data_digest=digest(run_spec.data),
            )
            sources[(model, source.label)] = planned
            runs.append(planned)
    entries = sorted(spec.methods, key=lambda entry: bool(entry.references))
    labels = {entry.display_label for entry in spec.methods}
    grid = itertools.product(spec.seeds, models, data, spec.train_sizes)
    for seed, model, (data_source, options), size in grid:
        cell: dict[str, list[PlannedRun]] = {}
        for entry in entries:
            needs: list[str] = []
            folders = []
            for reference in entry.references:
                if (model, reference) in sources:
                    needed = [sources[(model, reference)]]
                elif reference in labels:
                    needed = cell.get(reference, [])
                    if len(needed) != 1 or needed[0].needs:
                        raise ConfigError(
                            f"study {spec.name}: {entry.display_label} builds on {reference!r}, "
                            "which must be a method with one learning rate and no adapters of "
                            "its own"
                        )
                else:
                    folders.append(_adapter_folder(reference, base, spec.name))
                    continue
                needs.append(needed[0].run_id)
                folders.append(_source_folder(needed[0]))
            targets = _zero_shot_targets(spec, entry, model, sources, base, needs)
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
                    data_source,
                    entry.run_method(),
                    train_size=size,
                    train=train,
                    data_options=options.as_kwargs(),
                    device=spec.device,
                    scale=spec.scale,
                    fuse=tuple(folders) if entry.adapters else (),
                    stack=tuple(folders) if entry.stack else (),
                    zero_shot=targets,
                )
                planned = PlannedRun(
                    run_id(run_spec),
                    spec.name,
                    entry.display_label,
                    run_spec,
                    analysis,
                    needs=tuple(needs),
                    data_digest=digest(data_source),
                )
                cell.setdefault(entry.display_label, []).append(planned)
        order = [e.display_label for e in spec.methods]
        runs += [run for label in order for run in cell[label]]
    return _checked(spec.name, runs)


def _zero_shot_targets(
    spec: StudySpec,
    entry: MethodEntry,
    model: str,
    sources: dict[tuple[str, str], PlannedRun],
    base: Path,
    needs: list[str],
) -> tuple[ZeroShotTarget, ...]:
    """The study's zero-shot targets for `entry`'s runs, with the swaps of adapters it is
    stacked on; the source runs swapped in are added to `needs`."""
    targets = []
    for zero_shot in spec.zero_shot:
        swaps = []
        for old, new in zero_shot.stack_swap.items():
            if old not in (entry.stack or ()):
                continue
            if (model, new) in sources:
                needs.append(sources[(model, new)].run_id)
                folder = _source_folder(sources[(model, new)])
            else:
                folder = _adapter_folder(new, base, spec.name)
            swaps.append((as_adapter_name(old), folder))
        data = _local(zero_shot.data.source, base, set(builtin_datasets()))
        options = zero_shot.data.options.as_kwargs()
        targets.append(ZeroShotTarget(data, options, tuple(swaps)))
    return tuple(targets)


def _source_folder(run: PlannedRun) -> str:
    """How a run's spec names the folder of `run`, which it builds on."""
    return f"{RUN_REFERENCE}{run.run_id}/{as_adapter_name(run.method_label)}"


def _check_swaps(spec: StudySpec) -> None:
    """Every adapter a zero-shot target swaps out is stacked under some method."""
    stacked = {reference for entry in spec.methods for reference in entry.stack or ()}
    for zero_shot in spec.zero_shot:
        for old in zero_shot.stack_swap:
            if old not in stacked:
                raise ConfigError(
                    f"study {spec.name}: zero_shot {zero_shot.data.source} swaps {old!r}, which "
                    f"no method is stacked on (stacked: {', '.join(sorted(stacked)) or 'none'})"
                )


def _checked(study: str, runs: list[PlannedRun]) -> list[PlannedRun]:
    """The runs, each kept if another builds on it; refuses two runs with identical settings."""
    needed = {run_id for run in runs for run_id in run.needs}
    seen: dict[str, PlannedRun] = {}
    for run in runs:
        twin = seen.setdefault(run.run_id, run)
        if twin is not run:
            raise ConfigError(
                f"study {study}: runs '{twin.describe()}' and '{run.describe()}' "
                "have identical settings; remove one of the two methods (or models, data)"
            )
    return [replace(run, keep=run.run_id in needed) for run in runs]


def _adapter_folder(reference: str, base: Path, study: str) -> str:
    """A reference that is not a label: a trained run or adapter folder beside the spec."""
    path = (base / Path(reference).expanduser()).resolve()
    if not path.is_dir():
        raise ConfigError(
            f"study {study}: {reference!r} is no source or method label of the study, nor a "
            "run or adapter folder"
        )
    return str(path)


def _local(value: str, base: Path, builtin: set[str]) -> str:
    """An absolute path when `value` names a file or folder beside the spec, else `value`."""
    if value in builtin or value.startswith("hf:"):
        return value
    path = (base / Path(value).expanduser()).resolve()
    return str(path) if path.exists() else value
