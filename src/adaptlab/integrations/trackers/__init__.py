"""Experiment trackers: a run, a sequence or a study's runs reported to TensorBoard or MLflow
(`--report-to`, a study's `report_to:`). See docs/trackers.md.

    tracking = folder_tracking("tensorboard,mlflow", "runs/lora")
    with track(tracking, spec.to_dict()) as report:
        result = execute(spec, "runs/lora")
        report.finished_run(result, "runs/lora")
"""

from typing import TYPE_CHECKING

from adaptlab.lazy import lazy_face

if TYPE_CHECKING:
    from adaptlab.integrations.trackers.choice import (
        TRACKERS,
        Tracking,
        folder_tracking,
        report_to,
        study_tracking,
    )
    from adaptlab.integrations.trackers.session import TrackedRun, track

__all__ = [
    "TRACKERS",
    "TrackedRun",
    "Tracking",
    "folder_tracking",
    "report_to",
    "study_tracking",
    "track",
]

lazy_face(__name__)
