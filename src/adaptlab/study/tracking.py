"""Where a study's runs and sequences report (`report_to:`): one MLflow experiment per study, an
MLflow run per cell of the grid named by its id and tagged with what the cell varies (model,
data or strategy, method, train size, seed, learning rate), TensorBoard events beside the store.
Made in the driver as plain data (`Tracking`), checked there before the store is opened
(`check_study_tracking`), and opened where the item trains."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from adaptlab.integrations.trackers.choice import Tracking, study_tracking
from adaptlab.integrations.trackers.destinations import check_destinations
from adaptlab.study.planned import Planned
from adaptlab.study.spec import StudySpec


def item_tracking(spec: StudySpec, store: Path, item: Planned[Any]) -> Tracking | None:
    """The tracking of one run or sequence of the study `spec` with results in `store` (None:
    none)."""
    return study_tracking(spec.report_to, store, spec.name, item.run_id, item.tracking_tags())


def check_study_tracking(spec: StudySpec, store: Path, items: Sequence[Planned[Any]]) -> None:
    """Fail in one line, before the store is opened, unless every item of the study can report
    where its trackers write (its packages installed, its TensorBoard folder free of other
    writers' event files, the MLflow store writable or answering)."""
    checked = []
    for item in items:
        tracking = item_tracking(spec, store, item)
        if tracking is not None:
            checked.append((tracking, item.spec.to_dict()))
    check_destinations(checked)
