"""`study run`: plan a study, skip what the store has done, run the rest, write each result.

Resuming is the same call again: done runs are never redone; runs that failed or were cut off
(Ctrl-C, kill -9, a crash: their rows still say 'running') run again from the start.
"""

from __future__ import annotations

import time
from collections import defaultdict
from contextlib import closing
from dataclasses import replace
from pathlib import Path

from rich.console import Console

from adaptlab.engine.inputs import run_inputs
from adaptlab.engine.run import METRICS_FILE
from adaptlab.errors import ConfigError
from adaptlab.records.result import RunResult
from adaptlab.study.executors import Executor, LocalExecutor, Outcome
from adaptlab.study.lock import StoreLock
from adaptlab.study.planner import PlannedRun, plan_study
from adaptlab.study.progress import StudyProgress
from adaptlab.study.sequence_runner import run_sequence_study
from adaptlab.study.spec import StudySpec, load_spec
from adaptlab.study.store import ResultStore
from adaptlab.study.store_paths import check_store_path
from adaptlab.study.summary import StudySummary, timed
from adaptlab.study.tracking import cell_tracking, check_study_tracking
from adaptlab.tasks.judging import require_metric


def adapter_folders(store: Path) -> Path:
    """Where a study keeps the run folders other runs build on: `<store name>-adapters/`."""
    return store.with_name(f"{store.stem}-adapters")


def _folder_done(run: PlannedRun) -> bool:
    return run.out is not None and (Path(run.out) / METRICS_FILE).is_file()


def default_store(spec_path: Path, spec: StudySpec) -> Path:
    """`<name>.db` beside the spec."""
    return spec_path.parent / f"{spec.name}.db"


def run_study(
    spec_path: str | Path,
    *,
    store_path: str | Path | None = None,
    executor: Executor | None = None,
    console: Console | None = None,
    rerun_changed: bool = False,
) -> StudySummary:
    """Run every run of the spec not yet done in the store; returns what happened.

    A done run whose data file has changed since it ran is refused in one line, or, with
    `rerun_changed`, run again on the new contents."""
    began = time.perf_counter()
    spec_path = Path(spec_path)
    spent: defaultdict[str, float] = defaultdict(float)
    with timed(spent, "planning"):
        spec = load_spec(spec_path)
    store = Path(store_path) if store_path is not None else default_store(spec_path, spec)
    if spec.is_sequence:
        return run_sequence_study(
            spec,
            spec_path.resolve().parent,
            store,
            executor=executor,
            console=console,
            rerun_changed=rerun_changed,
            spent=spent,
        )
    with timed(spent, "planning"):
        runs = plan_study(spec, spec_path.resolve().parent)
    inputs = {i for run in runs for i in run_inputs(run.spec)}
    # a path that can be no store fails before the lock file is made
    check_store_path(store, [(spec_path, "study spec"), *sorted(inputs)])
    check_study_tracking(spec, store, runs)
    with StoreLock(store):
        summary = StudySummary(spec.name, store, len(runs), 0, spent=spent)
        with timed(summary.spent, "store"):
            results = ResultStore(store)
        with results:
            with timed(summary.spent, "store"):
                stored = results.data_digests()
                stale = changed_data(runs, stored)
                if stale and not rerun_changed:
                    raise ConfigError(describe_changed(stale, stored))
                for run in stale:
                    results.reopen(run.run_id, "its data changed since")
                results.set_plan(spec.name, runs, spec.metric)
                runs = [run.placed(adapter_folders(store)) for run in runs]
                runs = [replace(run, tracking=cell_tracking(spec, store, run)) for run in runs]
                states = results.statuses()
                for run in runs:
                    if run.keep and states.get(run.run_id) == "done" and not _folder_done(run):
                        results.reopen(run.run_id, "its adapter folder is missing")
                        states[run.run_id] = "failed"
            todo = [run for run in runs if states.get(run.run_id) != "done"]
            summary.done_before = len(runs) - len(todo)
            done = {run_id for run_id, state in states.items() if state == "done"}
            progress = StudyProgress(
                console or Console(), summary.planned, summary.done_before, len(todo), spec.metric
            )
            _run(todo, done, results, executor or LocalExecutor(), summary, progress)
    summary.wall_seconds = time.perf_counter() - began
    return summary


def changed_data(runs: list[PlannedRun], stored: dict[str, str | None]) -> list[PlannedRun]:
    """The done runs (with a data hash in `stored`) whose data contents now hash otherwise."""
    return [
        run
        for run in runs
        if run.data_digest is not None
        and stored.get(run.run_id) is not None
        and stored[run.run_id] != run.data_digest
    ]


def describe_changed(stale: list[PlannedRun], stored: dict[str, str | None]) -> str:
    """One line: which data changed under how many done runs, and what to do."""
    first = stale[0]
    same = [run for run in stale if run.spec.data == first.spec.data]
    others = len(stale) - len(same)
    before, now = stored[first.run_id] or "", first.data_digest or ""
    more = f" (and {others} more runs on other changed data)" if others else ""
    return (
        f"{first.spec.data} changed since {len(same)} done run{'s' if len(same) > 1 else ''} of "
        f"study {first.study} trained on it (contents {before[:12]} then, {now[:12]} now){more}; "
        "pass --rerun-changed to run them again on the new contents, or restore the file"
    )


def _run(
    todo: list[PlannedRun],
    done: set[str],
    results: ResultStore,
    executor: Executor,
    summary: StudySummary,
    progress: StudyProgress,
) -> None:
    """Run `todo` stage by stage: a run starts once the runs it builds on are `done`."""
    progress.header(summary.study, summary.store, executor.name)
    if not todo:
        return

    def started(run: PlannedRun) -> None:
        with timed(summary.spent, "store"):
            results.start(run)
        progress.started(run)

    def finished(outcome: Outcome) -> None:
        with timed(summary.spent, "store"):
            if outcome.result is not None:
                results.finish(outcome.run.run_id, outcome.result)
                done.add(outcome.run.run_id)
            else:
                results.fail(outcome.run.run_id, outcome.error or "failed")
        summary.outcomes.append(outcome)
        progress.finished_run(outcome)
        _check_metric(progress.metric, outcome.result)

    try:
        for stage in _stages(todo):
            ready = []
            for run in stage:
                missing = [needed for needed in run.needs if needed not in done]
                if missing:
                    started(run)
                    error = f"it builds on run {missing[0]}, which has not finished"
                    finished(Outcome(run, None, error, 0.0))
                else:
                    ready.append(run)
            with closing(executor.run(ready, started)) as outcomes:
                for outcome in outcomes:
                    finished(outcome)
    except KeyboardInterrupt:
        progress.interrupted()
        raise
    progress.summary()


def _stages(runs: list[PlannedRun]) -> list[list[PlannedRun]]:
    """`runs` in plan order, cut before each run that builds on one of its own group.

    An executor may run a group's runs side by side; the groups run one after another. Plan
    order (seeds outermost) is kept, so a study stopped half-way holds every method, those
    stacked on sources included, compared on the first seeds.
    """
    stages: list[list[PlannedRun]] = []
    current: set[str] = set()
    for run in runs:  # the planner puts every run after those it builds on
        if not stages or current.intersection(run.needs):
            stages.append([])
            current = set()
        stages[-1].append(run)
        current.add(run.run_id)
    return stages


def _check_metric(metric: str | None, result: RunResult | None) -> None:
    """Stop the study after its first run on data whose task does not compute `metric:`."""
    if metric is not None and result is not None:
        require_metric(metric, result.test, result.data.name, result.data.task)
