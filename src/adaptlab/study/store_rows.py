"""The typed rows a results store gives back: planned runs with their status, done runs and
done sequences (readers such as `status` and the report use these, never raw SQL rows)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from adaptlab.continual.result import SequenceResult
from adaptlab.records.result import RunResult


@dataclass(frozen=True)
class PlanRow:
    """A planned run and where it stands: status None means not started yet."""

    study: str
    run_id: str
    method_label: str
    status: str | None
    started_at: datetime | None
    finished_at: datetime | None
    host: str | None
    pid: int | None
    error: str | None
    data: tuple[str, ...] = ()
    """The data sources the plan names (paths for data files): a run's data set, a multi-task
    run's data sets (none for a sequence)."""
    data_digest: str | None = None
    """The hash of the data contents the run trained on, when it ran (None: not recorded)."""
    strategy_label: str | None = None
    """A sequence's strategy label (None: a single run)."""
    stages: int = 0
    """A sequence's stages (0: a single run)."""
    stages_done: int = 0
    """How many of them the store holds as finished."""

    @property
    def label(self) -> str:
        """The method label, with the strategy's for a sequence: `houlsby · replay`."""
        if self.strategy_label is None:
            return self.method_label
        return f"{self.method_label} · {self.strategy_label}"


@dataclass(frozen=True)
class StoredRun:
    """A done run as the store holds it: its result, the study and method label it ran as,
    and the metric its study's spec asked to judge by (None: the default rule)."""

    run_id: str
    study: str
    method_label: str
    result: RunResult
    study_metric: str | None = None


@dataclass(frozen=True)
class StoredSequence:
    """A done sequence as the store holds it: its result and the labels it ran as."""

    run_id: str
    study: str
    method_label: str
    strategy_label: str
    result: SequenceResult
