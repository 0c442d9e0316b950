"""Studies: a YAML grid of runs (spec), expanded (planner), executed locally or on Ray
(executors), each finished run one row of a SQLite results store (store). See docs/studies.md.
"""

from typing import TYPE_CHECKING

from adaptlab.lazy import lazy_face

if TYPE_CHECKING:
    from adaptlab.study.planner import PlannedRun, plan_study
    from adaptlab.study.runner import StudySummary, run_study
    from adaptlab.study.spec import StudySpec, load_spec
    from adaptlab.study.status import StudyStatus, study_status
    from adaptlab.study.store import ResultStore, StoredRun, load_records, load_validations

__all__ = [
    "PlannedRun",
    "ResultStore",
    "StoredRun",
    "StudySpec",
    "StudyStatus",
    "StudySummary",
    "load_records",
    "load_spec",
    "load_validations",
    "plan_study",
    "run_study",
    "study_status",
]

lazy_face(__name__)
