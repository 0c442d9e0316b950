"""Expand a sequence study into its sequences, each with a stable id.

The grid (`grid.py`) is seeds (outermost), models, train sizes, scales, methods, strategies,
learning rates: a study stopped half-way already holds every strategy compared on the first seeds. A
sequence's id hashes its resolved `SequenceSpec`, as a run's id hashes its `RunSpec`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import MutableMapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from adaptlab.continual.objectives import get_objective
from adaptlab.continual.result import SequenceResult
from adaptlab.continual.run import run_sequence, sequence_inputs
from adaptlab.continual.spec import SequenceSpec
from adaptlab.data.builtin import builtin_datasets
from adaptlab.data.identity import content_digest, joint_digest
from adaptlab.integrations.trackers.choice import Tracking
from adaptlab.integrations.trackers.session import track
from adaptlab.models.decoder import check_causal_lm
from adaptlab.study.executors import attempted
from adaptlab.study.grid import cells, grid_models, local_path, trainings
from adaptlab.study.planned import Outcome, StageDone, cell_line, cell_tags
from adaptlab.study.spec import StudySpec
from adaptlab.study.spec_scale import scale_label
from adaptlab.study.spec_sequences import stage_run_options


@dataclass(frozen=True)
class PlannedSequence:
    """One sequence of the grid: its id, study, method and strategy labels, the spec
    `run_sequence` gets, and a hash of its stages' data files (None: only built-ins).

    `single_scores`: the single-stage scores known (`run_sequence`'s), one mapping shared by
    the sequences of a plan, so a stage trained alone in this process serves them all. Set by
    the runner: `tracking`, where the sequence reports (`report_to:`); `checkpoint`, the folder
    keeping its state after each stage, from which a stopped sequence goes on.
    """

    run_id: str
    study: str
    method_label: str
    strategy_label: str
    spec: SequenceSpec
    data_digest: str | None = None
    tracking: Tracking | None = None
    checkpoint: str | None = None
    single_scores: MutableMapping[str, float] = field(default_factory=dict, compare=False)

    @property
    def label(self) -> str:
        """`method · strategy`: what status and reports call the arm."""
        return f"{self.method_label} · {self.strategy_label}"

    @property
    def needs(self) -> tuple[str, ...]:
        """A sequence builds on no other item."""
        return ()

    def describe(self) -> str:
        """A short human line: strategy · method · stages · size · seed · learning rate · model."""
        return cell_line(f"{self.label} · {len(self.spec.stages)} stages", self.spec)

    def tracking_tags(self) -> dict[str, str]:
        """What the sequence's cell varies: model, method, strategy, size, seed, learning rate."""
        return cell_tags(self.spec, method=self.method_label, strategy=self.strategy_label)

    def inputs(self) -> list[tuple[Path, str]]:
        """The sequence's base model and stage data files that exist here."""
        return sequence_inputs(self.spec)

    def placed(self, folders: Path, tracking: Tracking | None = None) -> PlannedSequence:
        """This sequence keeping its state in its folder under `folders`, reporting to
        `tracking`."""
        return replace(self, checkpoint=str(folders / self.run_id), tracking=tracking)

    def execute(self, progress: bool, on_stage: StageDone | None = None) -> Outcome[SequenceResult]:
        """Train (or go on with) the sequence in this process, reporting to its trackers (a
        resumed sequence reports the stages it trains now)."""

        def train() -> SequenceResult:
            with track(self.tracking, self.spec.to_dict()) as report:
                result = run_sequence(
                    self.spec,
                    progress=progress,
                    checkpoint=self.checkpoint,
                    on_stage=on_stage,
                    single_scores=self.single_scores,
                )
                report.finished_sequence(result)
            return result

        return Outcome(self, *attempted(train))


def sequence_id(spec: SequenceSpec) -> str:
    """12 hex digits of the SHA-256 of the resolved spec as canonical JSON."""
    text = json.dumps({"sequence": spec.to_dict()}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def plan_sequences(
    spec: StudySpec, base: Path, single_scores: MutableMapping[str, float] | None = None
) -> list[PlannedSequence]:
    """Every sequence of `spec`; relative model and data paths are read from `base`. The
    sequences share `single_scores` (default: a new, empty mapping). Where the study varies
    the scale, each sequence's method label names its scale."""
    single = {} if single_scores is None else single_scores
    models = grid_models(spec, base)
    objective = get_objective(spec.objective)
    if objective.needs_causal_lm:  # an encoder is refused before any sequence trains
        for model in models:
            check_causal_lm(model, f"the study's objective: {objective.name}")
    stages = tuple(local_path(entry.source, base, builtin_datasets()) for entry in spec.sequence)
    options = tuple(stage_run_options(entry, spec.objective, base) for entry in spec.sequence)
    digest = _digest(stages)
    planned = []
    for seed, model, sequence, size, scale in cells(spec, models, [stages]):
        for entry in spec.methods:
            runs = trainings(spec, entry, seed)
            for strategy in spec.strategies:
                name, strategy_options = strategy.strategy
                for train in runs:
                    built = SequenceSpec.build(
                        model,
                        sequence,
                        entry.run_method(),
                        name,
                        strategy_options,
                        train_size=size,
                        test_size=spec.test_size,
                        train=train,
                        device=spec.device,
                        scale=scale,
                        single_stage=spec.single_stage,
                        stage_options=options if any(options) else (),
                        objective=spec.objective,
                    )
                    planned.append(
                        PlannedSequence(
                            sequence_id(built),
                            spec.name,
                            entry.display_label + scale_label(spec.scale_axes, scale),
                            strategy.display_label,
                            built,
                            digest,
                            single_scores=single,
                        )
                    )
    return planned


def _digest(stages: tuple[str, ...]) -> str | None:
    """One hash over the contents of every stage's data file (None when all are built-in)."""
    return joint_digest([content_digest(stage) for stage in stages])
