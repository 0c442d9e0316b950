"""What `study run` prints: which run (or sequence) of how many, how each ended, and the time
left; a sequence adds a line per finished stage.

One line per run start and end (each run's own tqdm bar shows between them), so the output
reads the same in a terminal, a log file or a CI job. The ETA comes from the items finished in
this session: elapsed time / finished items x items left (with Ray, this counts parallel ones).
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic

from rich.console import Console
from rich.markup import escape

from adaptlab.continual.result import SequenceResult, StageOutcome
from adaptlab.records.result import RunResult
from adaptlab.study.planned import R
from adaptlab.tasks.choice import choose_metric

if TYPE_CHECKING:
    from adaptlab.study.planned import Outcome, Planned


def format_duration(seconds: float) -> str:
    """`42 s`, `3 min 05 s`, `2 h 07 min`."""
    total = round(seconds)
    if total < 60:
        return f"{total} s"
    minutes, secs = divmod(total, 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


class StudyProgress(ABC, Generic[R]):
    """Prints a study's progress to a rich console; each kind of item says how its result
    reads (`RunProgress`, `SequenceProgress`)."""

    unit = "run"
    """What the study runs, as its lines call it."""
    again = "unfinished runs start again"
    """What the next `study run` does with the items a stopped one left unfinished."""

    def __init__(self, console: Console, total: int, done_before: int, to_run: int) -> None:
        self.console = console
        self.total = total
        self.to_run = to_run
        self.position = done_before
        self.finished = 0
        self.failed = 0
        self._began = time.perf_counter()

    def _say(self, text: str) -> None:
        """One line, never wrapped (logs stay greppable), no automatic highlighting."""
        self.console.print(text, soft_wrap=True, highlight=False)

    def header(self, study: str, store: Path, executor: str) -> None:
        done = self.total - self.to_run
        if not self.to_run:
            self._say(f"[bold]study {escape(study)}[/]: all {self.total} {self.unit}s are done")
            return
        self._say(
            f"[bold]study {escape(study)}[/]: {self.total} {self.unit}s, {done} already done, "
            f"{self.to_run} to run ({executor} executor) -> {escape(str(store))}"
        )

    def started(self, run: Planned[Any], resumed: int = 0) -> None:
        """The line of an item handed to a worker; `resumed`: the stages it goes on after."""
        self.position += 1
        eta = self.eta()
        left = f"  [dim]ETA {format_duration(eta)}[/]" if eta is not None else ""
        self._say(
            f"[bold]{self.unit} {self.position}/{self.total}[/] {escape(run.describe())} "
            f"[dim]{run.run_id}[/]{self._resumed(resumed)}{left}"
        )

    def ended(self, outcome: Outcome[R]) -> None:
        """The line of a finished item: done, with its scores, or failed, with its error."""
        self.finished += 1
        label = f"{escape(outcome.run.label)} [dim]{outcome.run.run_id}[/]"
        result = outcome.result
        if result is None:
            self.failed += 1
            self._say(f"  [red]failed[/] {label}: {escape(outcome.error or '')}")
            return
        self._say(
            f"  [green]done[/] {label} in {format_duration(outcome.seconds)}: "
            f"{self._scores(result)}"
        )

    @abstractmethod
    def _scores(self, result: R) -> str:
        """What the done line says of a result."""

    def _resumed(self, stages: int) -> str:
        """What the start line adds of an item going on after `stages` finished stages (a
        run has none)."""
        return ""

    def eta(self) -> float | None:
        """Seconds left by the pace of this session's finished items; None before the first."""
        if not self.finished:
            return None
        pace = (time.perf_counter() - self._began) / self.finished
        return pace * (self.to_run - self.finished)

    def interrupted(self) -> None:
        self._say(
            f"stopped after {self.finished} of {self.to_run} {self.unit}s; the same command "
            f"continues from here ({self.again})"
        )

    def summary(self) -> None:
        took = format_duration(time.perf_counter() - self._began)
        ok = self.finished - self.failed
        failed = f", [red]{self.failed} failed[/]" if self.failed else ""
        self._say(f"[bold]finished[/]: {ok} {self.unit}s done{failed} in {took}")


class RunProgress(StudyProgress[RunResult]):
    """A run's done line: its test score by the study's `metric:` (None: the task's default)."""

    def __init__(
        self, console: Console, total: int, done_before: int, to_run: int, metric: str | None
    ) -> None:
        super().__init__(console, total, done_before, to_run)
        self.metric = metric

    def _scores(self, result: RunResult) -> str:
        metric = choose_metric(result.data.task, result.data.train_counts, self.metric).metric
        score = f"{result.test[metric]:.4f}" if metric in result.test else "not computed"
        if not result.epochs:
            return f"test {metric} {score} (trains nothing)"
        return f"test {metric} {score} (best epoch {result.best_epoch} of {len(result.epochs)})"


class SequenceProgress(StudyProgress[SequenceResult]):
    """A sequence's lines: where a resumed one goes on, a line per finished stage with its
    row of the matrix (`metric`), and the done line's average and backward transfer."""

    unit = "sequence"
    again = "unfinished sequences go on after their last finished stage"

    def __init__(
        self, console: Console, total: int, done_before: int, to_run: int, metric: str, stages: int
    ) -> None:
        super().__init__(console, total, done_before, to_run)
        self.metric = metric
        self.stages = stages

    def _resumed(self, stages: int) -> str:
        return f" [yellow]resumed after stage {stages}/{self.stages}[/]" if stages else ""

    def stage_done(self, index: int, outcome: StageOutcome) -> None:
        """The line of stage `index` finished: its time and its row of the matrix so far."""
        record = outcome.record
        row = " ".join(f"{score:.3f}" for score in outcome.row(self.metric)[: index + 1])
        self._say(
            f"  stage {index + 1}/{self.stages} {escape(record.name)} in "
            f"{format_duration(record.seconds)}: {self.metric} on stages 1-{index + 1}: {row}"
        )

    def _scores(self, result: SequenceResult) -> str:
        scores = result.scores
        bwt = "–" if scores.backward_transfer is None else f"{scores.backward_transfer:+.3f}"
        return f"average {scores.average:.3f}, BWT {bwt}"
