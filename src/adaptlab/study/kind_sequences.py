"""A sequence study: its grid (`sequence_plan`), each finished stage written to the store as
it ends, the state after it kept in the sequence's folder beside the store.

Resuming is the same call again: done sequences are never redone; a sequence cut off (Ctrl-C,
kill -9, a crash) goes on after its last finished stage, and a stage cut off half-way trains
again from its start. The folders are `<store name>-sequences/<sequence id>/` (safetensors and
JSON); a sequence's folder is removed once its result is in the store. On Ray a sequence is one
task, and its stages reach the store when its outcome comes back.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from pathlib import Path

from rich.console import Console

from adaptlab.continual.checkpoint import SequenceCheckpoint
from adaptlab.continual.objectives import get_objective
from adaptlab.continual.result import SequenceResult, StageOutcome
from adaptlab.continual.run import alone_key, alone_spec
from adaptlab.errors import AdaptlabError, one_line
from adaptlab.study.kind import StudyKind
from adaptlab.study.planned import Outcome, Planned
from adaptlab.study.progress import SequenceProgress
from adaptlab.study.sequence_plan import PlannedSequence, plan_sequences
from adaptlab.study.spec import StudySpec
from adaptlab.study.store import ResultStore


def sequence_folders(store: Path) -> Path:
    """Where a sequence study keeps the state of its unfinished sequences."""
    return store.with_name(f"{store.stem}-sequences")


def single_stage_scores(result: SequenceResult) -> dict[str, float]:
    """The single-stage scores of a done sequence, by `alone_key`: a stage trained alone is
    the same training whatever the strategy, so it runs once per study."""
    return {
        alone_key(alone_spec(result.spec, index)): score
        for index, score in list(enumerate(result.single_stage or ()))[1:]
    }


class SequenceKind(StudyKind[PlannedSequence, SequenceResult]):
    """The sequences of a sequence study."""

    changed_files = "the files"
    folders_beside = staticmethod(sequence_folders)

    def __init__(self, spec: StudySpec, spec_folder: Path, store: Path) -> None:
        super().__init__(spec, spec_folder, store)
        self._finished: dict[str, list[StageOutcome]] = {}
        self._single: dict[str, float] = {}
        self._shown: SequenceProgress | None = None

    def plan(self) -> list[PlannedSequence]:
        return plan_sequences(self.spec, self.spec_folder, self._single)

    def changed(self, stale: list[PlannedSequence], stored: Mapping[str, str | None]) -> str:
        """How many done sequences' stage files changed."""
        first = stale[0]
        sequences = f"{len(stale)} done sequence{'s' if len(stale) > 1 else ''}"
        since = f"changed since they ran (first: {first.label}, {first.run_id})"
        return f"a data file of the stages of {sequences} of study {first.study} {since}"

    def reconcile(
        self, items: list[PlannedSequence], results: ResultStore, states: dict[str, str]
    ) -> None:
        """The sequences share the single-stage scores of the store's done sequences; a done
        sequence's folder, left by a study stopped before it cleaned up, is removed."""
        for stored in results.sequences():
            self._single |= single_stage_scores(stored.result)
        done = [item.run_id for item in items if states.get(item.run_id) == "done"]
        for folder in (self.folders / run_id for run_id in done):
            if folder.exists():
                shutil.rmtree(folder)

    def progress(
        self, console: Console, total: int, done_before: int, to_run: int
    ) -> SequenceProgress:
        metric = get_objective(self.spec.objective).metric
        self._shown = SequenceProgress(
            console, total, done_before, to_run, metric, len(self.spec.sequence)
        )
        return self._shown

    def unready(self, item: PlannedSequence) -> str | None:
        """A sequence whose folder holds no state it can go on from fails in one line."""
        try:
            checkpoint = SequenceCheckpoint.open(self.folders / item.run_id, item.spec)
        except AdaptlabError as failure:
            return one_line(failure)
        self._finished[item.run_id] = checkpoint.completed
        return None

    def resumed(self, item: Planned[SequenceResult], results: ResultStore) -> int:
        """The store's stages of `item` made those its folder holds (an attempt whose state
        was not kept loses its later ones)."""
        finished = self._finished.pop(item.run_id)
        results.keep_stages(item.run_id, finished)
        return len(finished)

    def stage_done(
        self, item: Planned[SequenceResult], index: int, stage: StageOutcome, results: ResultStore
    ) -> None:
        super().stage_done(item, index, stage, results)
        if self._shown is not None:
            self._shown.stage_done(index, stage)

    def settled(self, outcome: Outcome[SequenceResult]) -> None:
        """A stored sequence needs its folder no more; its single-stage scores serve the
        sequences that start after it."""
        if outcome.result is not None:
            shutil.rmtree(self.folders / outcome.run.run_id, ignore_errors=True)
            self._single |= single_stage_scores(outcome.result)

    def closed(self) -> None:
        if self.folders.is_dir() and not any(self.folders.iterdir()):
            self.folders.rmdir()
