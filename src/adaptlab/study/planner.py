"""Expand a study spec into its list of runs, each with a stable id.

The order is seeds (outermost), models, data, train sizes, scales, methods, learning rates, so a
study
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
from adaptlab.data.generative_builtins import generative_builtin_datasets
from adaptlab.data.identity import content_digest
from adaptlab.engine.adapters import as_adapter_name
from adaptlab.engine.inputs import run_inputs
from adaptlab.errors import ConfigError
from adaptlab.integrations.trackers.choice import Tracking
from adaptlab.records.result import RunResult
from adaptlab.records.scale import Scale
from adaptlab.records.spec import RunSpec
from adaptlab.records.transfer import ZeroShotTarget
from adaptlab.study.analysis import AnalysisRequest
from adaptlab.study.executors import run_one
from adaptlab.study.grid import cells, grid_models, grid_scales, local_path, training, trainings
from adaptlab.study.planned import Outcome, StageDone, cell_line, cell_tags
from adaptlab.study.spec import StudySpec
from adaptlab.study.spec_methods import MethodEntry
from adaptlab.study.spec_scale import scale_label

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
    the runner. `adapter_label`: the label that names its adapter folder, where `method_label`
    adds the scale of a study that varies it (None: `method_label`).
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
    adapter_label: str | None = None

    @property
    def adapter_name(self) -> str:
        """The name of the adapter the run trains, and of its folder when it is kept."""
        return as_adapter_name(self.adapter_label or self.method_label)

    @property
    def strategy_label(self) -> None:
        """A run has no strategy."""
        return None

    @property
    def label(self) -> str:
        """The method label: what status and reports call the run's arm."""
        return self.method_label

    def describe(self) -> str:
        """A short human line: method · data · size · seed · learning rate · model."""
        return cell_line(f"{self.method_label} · {Path(self.spec.data).name}", self.spec)

    def tracking_tags(self) -> dict[str, str]:
        """What the run's cell varies: model, data, method, train size, seed, learning rate."""
        return cell_tags(self.spec, data=Path(self.spec.data).name, method=self.method_label)

    def inputs(self) -> list[tuple[Path, str]]:
        """The run's base model, data and adapter folders that exist here."""
        return run_inputs(self.spec)

    def execute(self, progress: bool, on_stage: StageDone | None = None) -> Outcome[RunResult]:
        """Train the run (and its analyses) in this process; a run has no stages to report."""
        result, error, seconds = run_one(
            self.spec, progress, self.analysis, self.out, self.tracking
        )
        return Outcome(self, result, error, seconds)

    def placed(self, folders: Path, tracking: Tracking | None = None) -> PlannedRun:
        """This run with its references made folders under `folders` (and its own, if kept),
        reporting to `tracking`."""

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
        out = str(folders / self.run_id / self.adapter_name) if self.keep else None
        return replace(self, spec=spec, out=out, tracking=tracking)


def run_id(spec: RunSpec) -> str:
    """12 hex digits of the SHA-256 of the resolved spec as canonical JSON."""
    text = json.dumps(spec.to_dict(), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def plan_study(spec: StudySpec, base: Path) -> list[PlannedRun]:
    """Every run of `spec`; relative model and data paths are read from `base` (spec folder).

    Sources come first (once per model and scale), then the grid; in each cell a method that
    fuses or stacks on other methods' adapters comes after them (those of its scale). Where the
    study varies the scale, each run's label names its scale.
    """
    _check_swaps(spec)
    models = grid_models(spec, base)
    builtins = {*builtin_datasets(), *generative_builtin_datasets()}
    data = [(local_path(d.source, base, builtins), d.run_options(base)) for d in spec.data]
    hashed = functools.cache(content_digest)  # each data file hashed once

    def digest(source: str) -> str | None:
        """The hash of a data file's contents; None for a built-in (whatever lies beside)."""
        return None if source in builtins else hashed(source)

    analysis = AnalysisRequest(tuple(spec.analysis), spec.analysis_tokens)
    runs: list[PlannedRun] = []
    sources: dict[tuple[str, Scale, str], PlannedRun] = {}
    scales = grid_scales(spec)
    for model in models:
        for scale, source in itertools.product(scales, spec.sources):
            seed = spec.seeds[0] if source.seed is None else source.seed
            train = training(spec, seed, source.learning_rate, source.epochs, source.batch_size)
            run_spec = RunSpec.build(
                model,
                local_path(source.data.source, base, builtins),
                source.run_method(),
                train_size=source.train_size,
                train=train,
                data_options=source.data.run_options(base),
                device=spec.device,
                scale=scale,
            )
            planned = PlannedRun(
                run_id(run_spec),
                spec.name,
                source.label + scale_label(spec.scale_axes, scale),
                run_spec,
                data_digest=digest(run_spec.data),
                adapter_label=source.label,
            )
            sources[(model, scale, source.label)] = planned
            runs.append(planned)
    entries = sorted(spec.methods, key=lambda entry: bool(entry.references))
    labels = {entry.display_label for entry in spec.methods}
    for seed, model, (data_source, options), size, scale in cells(spec, models, data):
        cell: dict[str, list[PlannedRun]] = {}
        for entry in entries:
            needs: list[str] = []
            folders = []
            for reference in entry.references:
                if (model, scale, reference) in sources:
                    needed = [sources[(model, scale, reference)]]
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
            targets = _zero_shot_targets(spec, entry, (model, scale), sources, base, needs)
            for train in trainings(spec, entry, seed):
                run_spec = RunSpec.build(
                    model,
                    data_source,
                    entry.run_method(),
                    train_size=size,
                    train=train,
                    data_options=dict(options),
                    device=spec.device,
                    scale=scale,
                    fuse=tuple(folders) if entry.adapters else (),
                    stack=tuple(folders) if entry.stack else (),
                    zero_shot=targets,
                )
                planned = PlannedRun(
                    run_id(run_spec),
                    spec.name,
                    entry.display_label + scale_label(spec.scale_axes, scale),
                    run_spec,
                    analysis,
                    needs=tuple(needs),
                    data_digest=digest(data_source),
                    adapter_label=entry.display_label,
                )
                cell.setdefault(entry.display_label, []).append(planned)
        order = [e.display_label for e in spec.methods]
        runs += [run for label in order for run in cell[label]]
    return _checked(spec.name, runs)


def _zero_shot_targets(
    spec: StudySpec,
    entry: MethodEntry,
    cell: tuple[str, Scale],
    sources: dict[tuple[str, Scale, str], PlannedRun],
    base: Path,
    needs: list[str],
) -> tuple[ZeroShotTarget, ...]:
    """The study's zero-shot targets for `entry`'s runs in `cell` (model and scale), with the
    swaps of adapters it is stacked on; the source runs swapped in are added to `needs`."""
    targets = []
    for zero_shot in spec.zero_shot:
        swaps = []
        for old, new in zero_shot.stack_swap.items():
            if old not in (entry.stack or ()):
                continue
            if (*cell, new) in sources:
                needs.append(sources[(*cell, new)].run_id)
                folder = _source_folder(sources[(*cell, new)])
            else:
                folder = _adapter_folder(new, base, spec.name)
            swaps.append((as_adapter_name(old), folder))
        data = local_path(zero_shot.data.source, base, builtin_datasets())
        options = zero_shot.data.run_options(base)
        targets.append(ZeroShotTarget(data, options, tuple(swaps)))
    return tuple(targets)


def _source_folder(run: PlannedRun) -> str:
    """How a run's spec names the folder of `run`, which it builds on."""
    return f"{RUN_REFERENCE}{run.run_id}/{run.adapter_name}"


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
