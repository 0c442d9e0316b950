"""`study run`: plan a study, skip what the store has done, run the rest, write each result.

Resuming is the same call again: done runs are never redone; runs that failed or were cut off
(Ctrl-C, kill -9, a crash: their rows still say 'running') run again from the start.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console

from adaptlab.study.executors import Executor, LocalExecutor, Outcome
from adaptlab.study.lock import StoreLock
from adaptlab.study.planner import PlannedRun, plan_study
from adaptlab.study.progress import StudyProgress
from adaptlab.study.spec import StudySpec, load_spec
from adaptlab.study.store import ResultStore
from adaptlab.train.choice import require_metric
from adaptlab.train.result import RunResult


@dataclass
class StudySummary:
    """What one `study run` did, and where its time went (for the overhead benchmark)."""

    study: str
    store: Path
    planned: int
    done_before: int
    outcomes: list[Outcome] = field(default_factory=list)
    wall_seconds: float = 0.0
    spent: defaultdict[str, float] = field(default_factory=lambda: defaultdict(float))
    """Seconds in the runner's own steps: 'planning', 'store' (all reads and writes)."""

    @property
    def failed(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.result is None]

    @property
    def run_seconds(self) -> float:
        """Seconds inside the runs themselves (summed; parallel with Ray)."""
        return sum(o.seconds for o in self.outcomes)


@contextmanager
def timed(spent: defaultdict[str, float], step: str) -> Iterator[None]:
    """Add the seconds the block takes to `spent[step]`."""
    began = time.perf_counter()
    try:
        yield
    finally:
        spent[step] += time.perf_counter() - began


def default_store(spec_path: Path, spec: StudySpec) -> Path:
    """`<name>.db` beside the spec."""
    return spec_path.parent / f"{spec.name}.db"


def run_study(
    spec_path: str | Path,
    *,
    store_path: str | Path | None = None,
    executor: Executor | None = None,
    console: Console | None = None,
) -> StudySummary:
    """Run every run of the spec not yet done in the store; returns what happened."""
    began = time.perf_counter()
    spec_path = Path(spec_path)
    spent: defaultdict[str, float] = defaultdict(float)
    with timed(spent, "planning"):
        spec = load_spec(spec_path)
        runs = plan_study(spec, spec_path.resolve().parent)
    store = Path(store_path) if store_path is not None else default_store(spec_path, spec)
    with StoreLock(store):
        summary = StudySummary(spec.name, store, len(runs), 0, spent=spent)
        with timed(summary.spent, "store"):
            results = ResultStore(store)
        with results:
            with timed(summary.spent, "store"):
                results.set_plan(spec.name, runs, spec.metric)
                states = results.statuses()
            todo = [run for run in runs if states.get(run.run_id) != "done"]
            summary.done_before = len(runs) - len(todo)
            progress = StudyProgress(
                console or Console(), summary.planned, summary.done_before, len(todo), spec.metric
            )
            _run(todo, results, executor or LocalExecutor(), summary, progress)
    summary.wall_seconds = time.perf_counter() - began
    return summary


def _run(
    todo: list[PlannedRun],
    results: ResultStore,
    executor: Executor,
    summary: StudySummary,
    progress: StudyProgress,
) -> None:
    progress.header(summary.study, summary.store, executor.name)
    if not todo:
        return

    def started(run: PlannedRun) -> None:
        with timed(summary.spent, "store"):
            results.start(run)
        progress.started(run)

    try:
        with closing(executor.run(todo, started)) as outcomes:
            for outcome in outcomes:
                with timed(summary.spent, "store"):
                    if outcome.result is not None:
                        results.finish(outcome.run.run_id, outcome.result)
                    else:
                        results.fail(outcome.run.run_id, outcome.error or "failed")
                summary.outcomes.append(outcome)
                progress.finished_run(outcome)
                _check_metric(progress.metric, outcome.result)
    except KeyboardInterrupt:
        progress.interrupted()
        raise
    progress.summary()


def _check_metric(metric: str | None, result: RunResult | None) -> None:
    """Stop the study after its first run on data whose task does not compute `metric:`."""
    if metric is not None and result is not None:
        require_metric(metric, result.test, result.data.name, result.data.task)
