"""Where each study in a results store stands: done, running, failed, left, and an ETA.

Reads the store without its lock, so it works while `study run` writes. A row that says
'running' but whose process is gone (Ctrl-C, kill -9, a crash) counts as interrupted: the next
`study run` starts it again, so it is counted with the runs left.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from adaptlab.data.identity import content_digest, joint_digest
from adaptlab.processes import process_alive
from adaptlab.study.store import ResultStore
from adaptlab.study.store_rows import PlanRow


@dataclass
class MethodCount:
    """Planned, done and failed runs of one method label."""

    label: str
    planned: int = 0
    done: int = 0
    failed: int = 0


@dataclass
class StudyStatus:
    """Counts of one study's planned runs by state, with the mean time of a done run."""

    study: str
    planned: int = 0
    done: int = 0
    running: int = 0
    interrupted: int = 0
    failed: int = 0
    done_seconds: list[float] = field(default_factory=list)
    methods: dict[str, MethodCount] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    """'label: error' of each failed run."""
    changed: list[str] = field(default_factory=list)
    """'label (run id)' of each done run whose data file changed since it ran."""
    unplanned: list[str] = field(default_factory=list)
    """'label (run id)' of each done run the study's spec no longer has (not counted above)."""
    stages: int = 0
    """Stages of the study's sequences, in all (0: a study of single runs)."""
    stages_done: int = 0
    """Of those, the stages finished: every stage of a done sequence, and the stages the
    store holds of a sequence running, interrupted or failed."""

    @property
    def left(self) -> int:
        """Runs the next `study run` starts: never started, or interrupted."""
        return self.planned - self.done - self.running - self.failed

    @property
    def mean_seconds(self) -> float | None:
        """Mean wall time of a done run (start to finish), None before the first."""
        return sum(self.done_seconds) / len(self.done_seconds) if self.done_seconds else None

    @property
    def eta_seconds(self) -> float | None:
        """Mean wall time of done runs x runs running or left (one after another); for
        sequences, x the sequences' worth of stages not finished."""
        mean = self.mean_seconds
        if mean is None:
            return None
        if self.stages:
            return mean * (self.stages - self.stages_done) * self.planned / self.stages
        return mean * (self.left + self.running)


def study_status(store: str | Path) -> list[StudyStatus]:
    """The status of every study planned in `store` (which must exist), by study name."""
    with ResultStore(store, create=False, read_only=True) as results:
        rows = results.plan_rows()
        unplanned = results.unplanned()
    studies: dict[str, StudyStatus] = {}
    digests: dict[tuple[str, ...], str | None] = {}
    for row in rows:
        status = studies.setdefault(row.study, StudyStatus(row.study))
        _count(status, row)
        if row.status == "done" and row.data and row.data_digest is not None:
            if row.data not in digests:
                digests[row.data] = _digest(row.data)
            if digests[row.data] not in (None, row.data_digest):
                status.changed.append(f"{row.method_label} ({row.run_id})")
    for study, run_id, label in unplanned:
        studies.setdefault(study, StudyStatus(study)).unplanned.append(f"{label} ({run_id})")
    return list(studies.values())


def _digest(sources: tuple[str, ...]) -> str | None:
    """The contents' hash a run of `sources` records: of its data file, or one over a
    multi-task run's (`adaptlab.data.identity`)."""
    if len(sources) == 1:
        return content_digest(sources[0])
    return joint_digest([content_digest(source) for source in sources])


def _count(status: StudyStatus, row: PlanRow) -> None:
    method = status.methods.setdefault(row.label, MethodCount(row.label))
    status.planned += 1
    method.planned += 1
    status.stages += row.stages
    status.stages_done += row.stages if row.status == "done" else row.stages_done
    if row.status == "done":
        status.done += 1
        method.done += 1
        if row.started_at and row.finished_at:
            status.done_seconds.append((row.finished_at - row.started_at).total_seconds())
    elif row.status == "failed":
        status.failed += 1
        method.failed += 1
        status.errors.append(f"{row.label}: {row.error}")
    elif row.status == "running":
        if process_alive(row.host, row.pid):
            status.running += 1
        else:
            status.interrupted += 1
