"""`study run` of a sequence study: each sequence in turn, each finished stage written to the
store as it ends, the state after it kept in the sequence's folder beside the store.

Resuming is the same call again: done sequences are never redone; a sequence cut off (Ctrl-C,
kill -9, a crash) goes on after its last finished stage, and a stage cut off half-way trains
again from its start. The folders are `<store name>-sequences/<sequence id>/` (safetensors and
JSON); a sequence's folder is removed once its result is in the store.
"""

from __future__ import annotations

import shutil
import time
from collections import defaultdict
from pathlib import Path

import torch
from rich.console import Console
from rich.markup import escape

from adaptlab.continual.checkpoint import SequenceCheckpoint
from adaptlab.continual.result import StageOutcome
from adaptlab.continual.run import alone_key, alone_spec, run_sequence, sequence_inputs
from adaptlab.errors import AdaptlabError, ConfigError
from adaptlab.integrations.trackers.choice import Tracking
from adaptlab.integrations.trackers.session import track
from adaptlab.study.executors import Executor, LocalExecutor, one_line
from adaptlab.study.lock import StoreLock
from adaptlab.study.progress import StudyProgress, format_duration
from adaptlab.study.sequence_plan import PlannedSequence, plan_sequences
from adaptlab.study.spec import StudySpec
from adaptlab.study.store import ResultStore
from adaptlab.study.store_paths import check_store_path
from adaptlab.study.summary import SequenceOutcome, StudySummary, timed
from adaptlab.study.tracking import check_study_tracking, sequence_tracking


def sequence_folders(store: Path) -> Path:
    """Where a sequence study keeps the state of its unfinished sequences."""
    return store.with_name(f"{store.stem}-sequences")


def run_sequence_study(
    spec: StudySpec,
    spec_folder: Path,
    store: Path,
    *,
    executor: Executor | None = None,
    console: Console | None = None,
    rerun_changed: bool = False,
    spent: defaultdict[str, float] | None = None,
) -> StudySummary:
    """Run every sequence of `spec` not yet done in `store`; returns what happened."""
    began = time.perf_counter()
    executor = executor or LocalExecutor()
    if not isinstance(executor, LocalExecutor):
        raise ConfigError(
            f"study {spec.name} trains sequences, which run one stage after another in this "
            "process; run it without --executor ray"
        )
    spent = spent if spent is not None else defaultdict(float)
    with timed(spent, "planning"):
        runs = plan_sequences(spec, spec_folder)
    inputs = {i for run in runs for i in sequence_inputs(run.spec)}
    check_store_path(store, sorted(inputs))
    check_study_tracking(spec, store, runs)
    folders = sequence_folders(store)
    with StoreLock(store):
        summary = StudySummary(spec.name, store, len(runs), 0, spent=spent)
        with timed(summary.spent, "store"):
            results = ResultStore(store)
        with results:
            with timed(summary.spent, "store"):
                _check_data(runs, results, rerun_changed)
                results.set_plan(spec.name, runs)
                states = results.statuses()
            todo = [run for run in runs if states.get(run.run_id) != "done"]
            for run in runs:
                if states.get(run.run_id) == "done" and (folders / run.run_id).exists():
                    shutil.rmtree(folders / run.run_id)  # stored, then stopped before cleaning
            summary.done_before = len(runs) - len(todo)
            with timed(summary.spent, "store"):
                single = single_stage_scores(results)
            progress = SequenceProgress(
                console or Console(), summary.planned, summary.done_before, len(todo)
            )
            progress.header(spec.name, store, "local")
            try:
                for run in todo:
                    folder = folders / run.run_id
                    tracking = sequence_tracking(spec, store, run)
                    outcome = _run_one(run, results, folder, executor, progress, single, tracking)
                    summary.outcomes.append(outcome)
                    progress.sequence_finished(outcome)
            except KeyboardInterrupt:
                progress.interrupted()
                raise
            if todo:
                progress.summary()
    if folders.is_dir() and not any(folders.iterdir()):
        folders.rmdir()
    summary.wall_seconds = time.perf_counter() - began
    return summary


def single_stage_scores(results: ResultStore) -> dict[str, float]:
    """The single-stage scores of the store's done sequences, by `alone_key`: a stage trained
    alone is the same training whatever the strategy, so it runs once per study."""
    scores = {}
    for stored in results.sequences():
        result = stored.result
        for index, score in list(enumerate(result.single_stage or ()))[1:]:
            scores[alone_key(alone_spec(result.spec, index))] = score
    return scores


def _check_data(runs: list[PlannedSequence], results: ResultStore, rerun_changed: bool) -> None:
    """Refuse (or, with `rerun_changed`, reopen) done sequences whose stage files changed."""
    stored = results.data_digests()
    stale = [
        run
        for run in runs
        if run.data_digest is not None
        and stored.get(run.run_id) is not None
        and stored[run.run_id] != run.data_digest
    ]
    if stale and not rerun_changed:
        raise ConfigError(
            f"a data file of the stages of {len(stale)} done sequence"
            f"{'s' if len(stale) > 1 else ''} of study {stale[0].study} changed since they ran "
            f"(first: {stale[0].label}, {stale[0].run_id}); pass --rerun-changed to run them "
            "again on the new contents, or restore the files"
        )
    for run in stale:
        results.reopen(run.run_id, "its data changed since")


def _run_one(
    run: PlannedSequence,
    results: ResultStore,
    folder: Path,
    executor: LocalExecutor,
    progress: SequenceProgress,
    single: dict[str, float],
    tracking: Tracking | None,
) -> SequenceOutcome:
    """Run (or go on with) one sequence, writing each stage to the store as it ends, and
    reporting to its trackers (a resumed sequence reports the stages it trains now)."""
    began = time.perf_counter()
    results.start(run)
    try:
        finished = SequenceCheckpoint.open(folder, run.spec).completed
        results.keep_stages(run.run_id, finished)
        progress.sequence_started(run, len(finished))

        def stage_done(index: int, outcome: StageOutcome) -> None:
            results.save_stage(run.run_id, index, outcome)
            progress.stage_done(run, index, outcome)

        with track(tracking, run.spec.to_dict()) as report:
            result = run_sequence(
                run.spec,
                progress=executor.progress,
                checkpoint=folder,
                on_stage=stage_done,
                single_scores=single,
            )
            report.finished_sequence(result)
    except (AdaptlabError, torch.OutOfMemoryError) as failure:
        results.fail(run.run_id, one_line(failure))
        return SequenceOutcome(run, None, one_line(failure), time.perf_counter() - began)
    results.finish_sequence(run.run_id, result)
    shutil.rmtree(folder, ignore_errors=True)
    return SequenceOutcome(run, result, None, time.perf_counter() - began)


class SequenceProgress(StudyProgress):
    """`study run`'s lines for sequences: one per sequence start and end, one per stage."""

    unit = "sequence"

    def sequence_started(self, run: PlannedSequence, finished: int) -> None:
        self.position += 1
        eta = self.eta()
        left = f"  [dim]ETA {format_duration(eta)}[/]" if eta is not None else ""
        stages = len(run.spec.stages)
        resumed = f" [yellow]resumed after stage {finished}/{stages}[/]" if finished else ""
        self._say(
            f"[bold]sequence {self.position}/{self.total}[/] {escape(run.describe())} "
            f"[dim]{run.run_id}[/]{resumed}{left}"
        )

    def stage_done(self, run: PlannedSequence, index: int, outcome: StageOutcome) -> None:
        record = outcome.record
        metric = run.spec.metric
        row = " ".join(f"{score:.3f}" for score in outcome.row(metric)[: index + 1])
        self._say(
            f"  stage {index + 1}/{len(run.spec.stages)} {escape(record.name)} in "
            f"{format_duration(record.seconds)}: {metric} on stages 1-{index + 1}: {row}"
        )

    def sequence_finished(self, outcome: SequenceOutcome) -> None:
        self.finished += 1
        label = f"{escape(outcome.run.label)} [dim]{outcome.run.run_id}[/]"
        result = outcome.result
        if result is None:
            self.failed += 1
            self._say(f"  [red]failed[/] {label}: {escape(outcome.error or '')}")
            return
        scores = result.scores
        bwt = "–" if scores.backward_transfer is None else f"{scores.backward_transfer:+.3f}"
        self._say(
            f"  [green]done[/] {label} in {format_duration(outcome.seconds)}: average "
            f"{scores.average:.3f}, BWT {bwt}"
        )
