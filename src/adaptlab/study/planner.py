"""Expand a study spec into its list of runs, each with a stable id.

The order is seeds (outermost), models, data, train sizes, scales, methods, learning rates, so a
study stopped half-way already holds every method compared on the first seeds. A run's id is a
hash of its fully resolved `RunSpec` (methods with every option, learning rate, seed, ...):
the same run planned by any study or any process gets the same id, and a finished id is never
run again. The entries spanning the data sets (combine, across-data fusion, multi-task) are
planned after the cells of each seed and model (`spanning_plan`).
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from adaptlab.data.builtin import builtin_datasets
from adaptlab.data.generative_builtins import generative_builtin_datasets
from adaptlab.data.identity import content_digest
from adaptlab.data.preference_builtins import preference_builtin_datasets
from adaptlab.engine.adapters import as_adapter_name
from adaptlab.errors import ConfigError
from adaptlab.records.scale import Scale
from adaptlab.records.spec import RunSpec
from adaptlab.records.transfer import ZeroShotTarget
from adaptlab.study.analysis import AnalysisRequest
from adaptlab.study.grid import (
    entry_run_spec,
    grid_models,
    grid_scales,
    local_path,
    training,
    trainings,
)
from adaptlab.study.planned_run import RUN_REFERENCE, PlannedRun, run_id, source_folder
from adaptlab.study.spanning_plan import SpanningPlan
from adaptlab.study.spec import StudySpec
from adaptlab.study.spec_methods import MethodEntry
from adaptlab.study.spec_scale import scale_label

__all__ = ["RUN_REFERENCE", "PlannedRun", "plan_study", "run_id"]


def plan_study(spec: StudySpec, base: Path) -> list[PlannedRun]:
    """Every run of `spec`; relative model and data paths are read from `base` (spec folder).

    Sources come first (once per model and scale), then the grid; in each cell a method that
    fuses or stacks on other methods' adapters comes after them (those of its scale), and after
    the cells of each seed and model come the runs spanning their data sets. Where the study
    varies the scale, each run's label names its scale.
    """
    _check_swaps(spec)
    models = grid_models(spec, base)
    builtins = {
        *builtin_datasets(),
        *generative_builtin_datasets(),
        *preference_builtin_datasets(),
    }
    data = [
        (local_path(d.source, base, builtins), options)
        for d in spec.data
        for options in with_betas(d.run_options(base), spec.betas)
    ]
    hashed = functools.cache(content_digest)  # each data file hashed once

    def digest(source: str) -> str | None:
        """The hash of a data file's contents; None for a built-in (whatever lies beside)."""
        return None if source in builtins else hashed(source)

    harness = None if spec.harness is None else spec.harness.request(base)
    forgetting = None if spec.forgetting is None else spec.forgetting.request(base)
    analysis = AnalysisRequest(tuple(spec.analysis), spec.analysis_tokens, harness, forgetting)
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
    entries = sorted(
        (entry for entry in spec.methods if not entry.spans_data),
        key=lambda entry: bool(entry.references),
    )
    labels = {entry.display_label for entry in spec.methods}
    spanning = SpanningPlan(spec, data, digest)
    for seed, model in itertools.product(spec.seeds, models):
        for (index, (data_source, options)), size, scale in itertools.product(
            enumerate(data), spec.train_sizes, scales
        ):
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
                                f"study {spec.name}: {entry.display_label} builds on "
                                f"{reference!r}, which must be a method with one learning rate "
                                "and no adapters of its own"
                            )
                    else:
                        folders.append(_adapter_folder(reference, base, spec.name))
                        continue
                    needs.append(needed[0].run_id)
                    folders.append(source_folder(needed[0]))
                targets = _zero_shot_targets(spec, entry, (model, scale), sources, base, needs)
                for train in trainings(spec, entry, seed):
                    run_spec = entry_run_spec(
                        spec,
                        entry,
                        (model, data_source, options),
                        size,
                        scale,
                        train,
                        fuse=tuple(folders) if entry.adapters else (),
                        stack=tuple(folders) if entry.stack else (),
                        zero_shot=targets,
                    )
                    planned = PlannedRun(
                        run_id(run_spec),
                        spec.name,
                        entry.display_label
                        + scale_label(spec.scale_axes, scale)
                        + beta_label(spec.betas, options),
                        run_spec,
                        analysis,
                        needs=tuple(needs),
                        data_digest=digest(data_source),
                        adapter_label=spanning.folder_name(entry, index),
                    )
                    cell.setdefault(entry.display_label, []).append(planned)
            spanning.built(index, cell)
            runs += [run for e in spec.methods for run in cell.get(e.display_label, [])]
        for size, scale in itertools.product(spec.train_sizes, scales):
            runs += spanning.runs(seed, model, size, scale, analysis)
    return _checked(spec.name, runs)


def with_betas(options: dict[str, Any], betas: Sequence[float]) -> list[dict[str, Any]]:
    """A data entry's run options, once per beta of the study's `betas` (as given: none)."""
    return [{**options, "beta": beta} for beta in betas] or [options]


def beta_label(betas: Sequence[float], options: dict[str, Any]) -> str:
    """What a cell's label adds where the study crosses betas: " · beta=0.1"."""
    return f" · beta={options['beta']:g}" if len(betas) > 1 else ""


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
                folder = source_folder(sources[(*cell, new)])
            else:
                folder = _adapter_folder(new, base, spec.name)
            swaps.append((as_adapter_name(old), folder))
        data = local_path(zero_shot.data.source, base, builtin_datasets())
        options = zero_shot.data.run_options(base)
        targets.append(ZeroShotTarget(data, options, tuple(swaps)))
    return tuple(targets)


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
