"""The grid a study spec expands to, shared by its runs (`planner`) and its sequences
(`sequence_plan`): cells ordered seeds (outermost), models, data, train sizes, scales, so a
study stopped half-way already holds every method compared on the first seeds; in each cell the
methods, each with one training per learning rate, made here once."""

from __future__ import annotations

import itertools
from collections.abc import Collection, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from adaptlab.errors import ConfigError
from adaptlab.models.builtin import BUILTIN_MODELS
from adaptlab.records.config import TrainConfig
from adaptlab.records.scale import Scale, resolve_auto
from adaptlab.records.spec import RunSpec
from adaptlab.study.spec import StudySpec
from adaptlab.study.spec_methods import MethodEntry

D = TypeVar("D")


def entry_run_spec(
    spec: StudySpec,
    entry: MethodEntry,
    cell: tuple[str, str, Mapping[str, Any]],
    size: int | None,
    scale: Scale,
    train: TrainConfig,
    **parts: Any,
) -> RunSpec:
    """The run of `entry` with `train` in a grid cell (model, data source, data options), on
    `spec`'s device and test size; `parts` are the spec's other fields (`fuse`, `stack`...)."""
    model, source, options = cell
    return RunSpec.build(
        model,
        source,
        entry.run_method(),
        train_size=size,
        train=train,
        data_options=dict(options),
        device=spec.device,
        scale=scale,
        test_size=spec.test_size,
        **parts,
    )


def local_path(value: str, base: Path, builtin: Collection[str]) -> str:
    """An absolute path when `value` names a file or folder beside the spec (in `base`), else
    `value` (a built-in of `builtin`, an `hf:` source, or a name resolved later)."""
    if value in builtin or value.startswith("hf:"):
        return value
    path = (base / Path(value).expanduser()).resolve()
    return str(path) if path.exists() else value


def grid_models(spec: StudySpec, base: Path) -> list[str]:
    """The study's models, those beside the spec as absolute paths."""
    return [local_path(model, base, BUILTIN_MODELS) for model in spec.models]


def grid_scales(spec: StudySpec) -> list[Scale]:
    """The study's scales with "auto" precision decided for this machine, as its runs resolve
    it; refuses an `auto` that decides on a precision the study also lists."""
    scales: list[Scale] = []
    for written in spec.scales:
        scale = resolve_auto(spec.device, written)[1]
        if scale in scales:
            raise ConfigError(
                f"study {spec.name}: precision auto is {scale.precision} on this machine, which "
                "precision also lists; list each precision once"
            )
        scales.append(scale)
    return scales


def cells(
    spec: StudySpec, models: Sequence[str], data: Sequence[D]
) -> Iterator[tuple[int, str, D, int | None, Scale]]:
    """(seed, model, data, train size, scale) of every cell, in grid order. `data` is what one
    cell trains on: a data set for runs, the whole sequence of stages for sequences."""
    return itertools.product(spec.seeds, models, data, spec.train_sizes, grid_scales(spec))


def training(
    spec: StudySpec,
    seed: int,
    learning_rate: float | None,
    epochs: int | None = None,
    batch_size: int | None = None,
) -> TrainConfig:
    """The training of one grid entry: its own epochs and batch size, else the study's."""
    return TrainConfig(
        epochs=epochs or spec.epochs,
        batch_size=batch_size or spec.batch_size,
        learning_rate=learning_rate,
        max_length=spec.max_length,
        seed=seed,
    )


def trainings(spec: StudySpec, entry: MethodEntry, seed: int) -> list[TrainConfig]:
    """One training of `entry` per learning rate (its own, else the study's; `auto`: one, at
    the method's default)."""
    rates = entry.learning_rates or spec.learning_rates
    return [
        training(spec, seed, rate, entry.epochs, entry.batch_size)
        for rate in ([None] if isinstance(rates, str) else rates)
    ]
