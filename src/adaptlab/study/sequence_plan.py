"""Expand a sequence study into its sequences, each with a stable id.

The grid is seeds (outermost), models, train sizes, methods, strategies, learning rates: a
study stopped half-way already holds every strategy compared on the first seeds. A sequence's
id hashes its resolved `SequenceSpec`, as a run's id hashes its `RunSpec`.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from dataclasses import dataclass
from pathlib import Path

from adaptlab.continual.decoder import check_causal_lm
from adaptlab.continual.objectives import get_objective
from adaptlab.continual.spec import SequenceSpec
from adaptlab.data.builtin import builtin_datasets
from adaptlab.data.identity import content_digest
from adaptlab.models.builtin import BUILTIN_MODELS
from adaptlab.records.config import TrainConfig
from adaptlab.study.planner import _local
from adaptlab.study.spec import StudySpec


@dataclass(frozen=True)
class PlannedSequence:
    """One sequence of the grid: its id, study, method and strategy labels, the spec
    `run_sequence` gets, and a hash of its stages' data files (None: only built-ins)."""

    run_id: str
    study: str
    method_label: str
    strategy_label: str
    spec: SequenceSpec
    data_digest: str | None = None

    @property
    def label(self) -> str:
        """`method · strategy`: what status and reports call the arm."""
        return f"{self.method_label} · {self.strategy_label}"

    def describe(self) -> str:
        """A short human line: strategy · method · stages · size · seed · learning rate · model."""
        size = "all" if self.spec.train_size is None else f"{self.spec.train_size:,}"
        return (
            f"{self.label} · {len(self.spec.stages)} stages · {size} ex · "
            f"seed {self.spec.train.seed} · lr {self.spec.learning_rate():g} · "
            f"{Path(self.spec.model).name}"
        )


def sequence_id(spec: SequenceSpec) -> str:
    """12 hex digits of the SHA-256 of the resolved spec as canonical JSON."""
    text = json.dumps({"sequence": spec.to_dict()}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def plan_sequences(spec: StudySpec, base: Path) -> list[PlannedSequence]:
    """Every sequence of `spec`; relative model and data paths are read from `base`."""
    models = [_local(model, base, set(BUILTIN_MODELS)) for model in spec.models]
    objective = get_objective(spec.objective)
    if objective.needs_causal_lm:  # an encoder is refused before any sequence trains
        for model in models:
            check_causal_lm(model, f"the study's objective: {objective.name}")
    builtin = set(builtin_datasets())
    stages = tuple(_local(entry.source, base, builtin) for entry in spec.sequence)
    options = tuple(entry.options.as_kwargs() for entry in spec.sequence)
    digest = _digest(stages)
    planned = []
    grid = itertools.product(spec.seeds, models, spec.train_sizes, spec.methods, spec.strategies)
    for seed, model, size, entry, strategy in grid:
        rates = entry.learning_rates or spec.learning_rates
        for rate in [None] if isinstance(rates, str) else rates:
            train = TrainConfig(
                epochs=entry.epochs or spec.epochs,
                batch_size=entry.batch_size or spec.batch_size,
                learning_rate=rate,
                max_length=spec.max_length,
                seed=seed,
            )
            name, strategy_options = strategy.strategy
            sequence = SequenceSpec.build(
                model,
                stages,
                entry.run_method(),
                name,
                strategy_options,
                train_size=size,
                test_size=spec.test_size,
                train=train,
                device=spec.device,
                scale=spec.scale,
                single_stage=spec.single_stage,
                stage_options=options if any(options) else (),
                objective=spec.objective,
            )
            planned.append(
                PlannedSequence(
                    sequence_id(sequence),
                    spec.name,
                    entry.display_label,
                    strategy.display_label,
                    sequence,
                    digest,
                )
            )
    return planned


def _digest(stages: tuple[str, ...]) -> str | None:
    """One hash over the contents of every stage's data file (None when all are built-in)."""
    digests = [content_digest(stage) for stage in stages]
    if not any(digests):
        return None
    return hashlib.sha256(json.dumps(digests).encode("utf-8")).hexdigest()
