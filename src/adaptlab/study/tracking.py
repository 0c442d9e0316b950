"""Where a study's runs report (`report_to:`): one MLflow experiment per study, an MLflow run per
cell of the grid named by its run id and tagged with what the cell varies (model, data,
method, train size, seed, learning rate), TensorBoard events beside the store. Made in the
driver as plain data (`Tracking`), checked there before the store is opened
(`check_study_tracking`), and opened where the run trains."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from adaptlab.integrations.trackers.choice import Tracking, study_tracking
from adaptlab.integrations.trackers.destinations import check_destinations
from adaptlab.study.planner import PlannedRun
from adaptlab.study.sequence_plan import PlannedSequence
from adaptlab.study.spec import StudySpec


def cell_tracking(spec: StudySpec, store: Path, run: PlannedRun) -> Tracking | None:
    """The tracking of one run of the study `spec` with results in `store` (None: none)."""
    train = run.spec
    tags = {
        "model": Path(train.model).name,
        "data": Path(train.data).name,
        "method": run.method_label,
        "size": "all" if train.train_size is None else str(train.train_size),
        "seed": str(train.train.seed),
        "learning_rate": f"{train.learning_rate():g}",
    }
    return study_tracking(spec.report_to, store, spec.name, run.run_id, tags)


def sequence_tracking(spec: StudySpec, store: Path, run: PlannedSequence) -> Tracking | None:
    """The tracking of one sequence of the sequence study `spec` (None: none)."""
    sequence = run.spec
    tags = {
        "model": Path(sequence.model).name,
        "method": run.method_label,
        "strategy": run.strategy_label,
        "size": "all" if sequence.train_size is None else str(sequence.train_size),
        "seed": str(sequence.train.seed),
        "learning_rate": f"{sequence.learning_rate():g}",
    }
    return study_tracking(spec.report_to, store, spec.name, run.run_id, tags)


def check_study_tracking(
    spec: StudySpec, store: Path, runs: Sequence[PlannedRun] | Sequence[PlannedSequence]
) -> None:
    """Fail in one line, before the store is opened, unless every run of the study can report
    where its trackers write (its packages installed, its TensorBoard folder free of other
    writers' event files, the MLflow store writable or answering)."""
    checked = []
    for run in runs:
        if isinstance(run, PlannedRun):
            tracking = cell_tracking(spec, store, run)
        else:
            tracking = sequence_tracking(spec, store, run)
        if tracking is not None:
            checked.append((tracking, run.spec.to_dict()))
    check_destinations(checked)
