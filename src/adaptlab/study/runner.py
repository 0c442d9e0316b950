"""`study run`: plan a study, skip what the store has done, run the rest, write each result.

One flow for a study of runs and a sequence study: plan, lock, store, changed-data check,
tracking check, statuses, the items left, the executor, progress; what differs comes from the
study's kind (`kind_runs.py`, `kind_sequences.py`). Resuming is the same call again: done items
are never redone; runs that failed or were cut off (Ctrl-C, kill -9, a crash: their rows still
say 'running') run again from the start, sequences go on after their last finished stage.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Mapping
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Generic

from rich.console import Console

from adaptlab.continual.result import StageOutcome
from adaptlab.errors import ConfigError
from adaptlab.study.executors import Executor, LocalExecutor
from adaptlab.study.kind import P, StudyKind
from adaptlab.study.kind_runs import RunKind
from adaptlab.study.kind_sequences import SequenceKind
from adaptlab.study.lock import StoreLock
from adaptlab.study.planned import Outcome, Planned, R
from adaptlab.study.progress import StudyProgress
from adaptlab.study.spec import StudySpec, load_spec
from adaptlab.study.store import ResultStore
from adaptlab.study.store_paths import check_store_path
from adaptlab.study.summary import StudySummary, timed
from adaptlab.study.tracking import check_study_tracking, item_tracking


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
    """Run every run (or sequence) of the spec not yet done in the store; returns what happened.

    A done item whose data file has changed since it ran is refused in one line, or, with
    `rerun_changed`, run again on the new contents."""
    began = time.perf_counter()
    spec_path = Path(spec_path)
    spent: defaultdict[str, float] = defaultdict(float)
    with timed(spent, "planning"):
        spec = load_spec(spec_path)
    store = Path(store_path) if store_path is not None else default_store(spec_path, spec)
    folder = spec_path.resolve().parent
    session = (spec_path, executor or LocalExecutor(), console or Console(), rerun_changed, spent)
    if spec.is_sequence:
        summary = _run_kind(SequenceKind(spec, folder, store), *session)
    else:
        summary = _run_kind(RunKind(spec, folder, store), *session)
    summary.wall_seconds = time.perf_counter() - began
    return summary


def changed_data(items: list[P], stored: Mapping[str, str | None]) -> list[P]:
    """The done items (with a data hash in `stored`) whose data contents now hash otherwise."""
    return [
        item
        for item in items
        if item.data_digest is not None
        and stored.get(item.run_id) is not None
        and stored[item.run_id] != item.data_digest
    ]


def _run_kind(
    kind: StudyKind[P, R],
    spec_path: Path,
    executor: Executor,
    console: Console,
    rerun_changed: bool,
    spent: defaultdict[str, float],
) -> StudySummary:
    """Plan `kind`'s items, then run those its store has not done, under the store's lock."""
    spec, store = kind.spec, kind.store
    with timed(spent, "planning"):
        items = kind.plan()
    inputs = {named for item in items for named in item.inputs()}
    # a path that can be no store fails before the lock file is made
    check_store_path(store, [(spec_path, "study spec"), *sorted(inputs)])
    check_study_tracking(spec, store, items)
    with StoreLock(store):
        summary = StudySummary(spec.name, store, len(items), 0, spent=spent)
        with timed(summary.spent, "store"):
            results = ResultStore(store)
        with results:
            with timed(summary.spent, "store"):
                stored = results.data_digests()
                stale = changed_data(items, stored)
                if stale and not rerun_changed:
                    raise ConfigError(
                        f"{kind.changed(stale, stored)}; pass --rerun-changed to run them again "
                        f"on the new contents, or restore {kind.changed_files}"
                    )
                for item in stale:
                    results.reopen(item.run_id, "its data changed since")
                results.set_plan(spec.name, items, spec.metric)
                states = results.statuses()
                items = [
                    item.placed(kind.folders, item_tracking(spec, store, item)) for item in items
                ]
                kind.reconcile(items, results, states)
            todo = [item for item in items if states.get(item.run_id) != "done"]
            summary.done_before = len(items) - len(todo)
            done = {run_id for run_id, state in states.items() if state == "done"}
            progress = kind.progress(console, summary.planned, summary.done_before, len(todo))
            _Run(kind, results, summary, progress, done).all(todo, executor)
    kind.closed()
    return summary


@dataclass
class _Run(Generic[P, R]):
    """Runs the items left, group by group, writing each start, stage and outcome to the store;
    `done`: the ids of the items done."""

    kind: StudyKind[P, R]
    results: ResultStore
    summary: StudySummary
    progress: StudyProgress[R]
    done: set[str]

    def all(self, todo: list[P], executor: Executor) -> None:
        """Run `todo` group by group: an item starts once the items it builds on are `done`."""
        self.progress.header(self.summary.study, self.summary.store, executor.name)
        if not todo:
            return
        try:
            for group in _groups(todo):
                ready = []
                for item in group:
                    why = self._blocked(item)
                    if why is None:
                        ready.append(item)
                    else:  # stored as started and failed, with the reason
                        self._start(item)
                        self.progress.started(item)
                        self.finished(Outcome(item, None, why, 0.0))
                with closing(executor.run(ready, self.started, self.stage_done)) as outcomes:
                    for outcome in outcomes:
                        self.finished(outcome)
        except KeyboardInterrupt:
            self.progress.interrupted()
            raise
        self.progress.summary()

    def _blocked(self, item: P) -> str | None:
        """Why `item` cannot start: an item it builds on is not done, or its kind says so."""
        missing = [needed for needed in item.needs if needed not in self.done]
        if missing:
            return f"it builds on run {missing[0]}, which has not finished"
        return self.kind.unready(item)

    def _start(self, item: Planned[R]) -> None:
        with timed(self.summary.spent, "store"):
            self.results.start(item)

    def started(self, item: Planned[R]) -> None:
        """`item` is handed to a worker: marked running, going on after its finished stages."""
        self._start(item)
        with timed(self.summary.spent, "store"):
            resumed = self.kind.resumed(item, self.results)
        self.progress.started(item, resumed)

    def stage_done(self, item: Planned[R], index: int, stage: StageOutcome) -> None:
        with timed(self.summary.spent, "store"):
            self.kind.stage_done(item, index, stage, self.results)

    def finished(self, outcome: Outcome[R]) -> None:
        """Store `outcome` (done or failed) and show it."""
        run_id = outcome.run.run_id
        with timed(self.summary.spent, "store"):
            if outcome.result is not None:
                self.results.finish(run_id, outcome.result)
                self.done.add(run_id)
            else:
                self.results.fail(run_id, outcome.error or "failed")
        self.summary.outcomes.append(outcome)
        self.progress.ended(outcome)
        self.kind.settled(outcome)


def _groups(items: list[P]) -> list[list[P]]:
    """`items` in plan order, cut before each item that builds on one of its own group.

    An executor may run a group's items side by side; the groups run one after another. Plan
    order (seeds outermost) is kept, so a study stopped half-way holds every method, those
    stacked on sources included, compared on the first seeds.
    """
    groups: list[list[P]] = []
    current: set[str] = set()
    for item in items:  # the planner puts every run after those it builds on
        if not groups or current.intersection(item.needs):
            groups.append([])
            current = set()
        groups[-1].append(item)
        current.add(item.run_id)
    return groups
