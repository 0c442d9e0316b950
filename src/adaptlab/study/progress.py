"""What `study run` prints: which run of how many, how each ended, and the time left.

One line per run start and end (each run's own tqdm bar shows between them), so the output
reads the same in a terminal, a log file or a CI job. The ETA comes from the runs finished in
this session: elapsed time / finished runs x runs left (with Ray, this counts parallel runs).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape

from adaptlab.tasks.choice import choose_metric

if TYPE_CHECKING:
    from adaptlab.study.executors import Outcome
    from adaptlab.study.planner import PlannedRun


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


_AGAIN = {
    "run": "unfinished runs start again",
    "sequence": "unfinished sequences go on after their last finished stage",
}


class StudyProgress:
    """Prints a study's progress to a rich console; `metric` is the spec's `metric:`, if any."""

    unit = "run"
    """What the study runs, as its lines call it."""

    def __init__(
        self,
        console: Console,
        total: int,
        done_before: int,
        to_run: int,
        metric: str | None = None,
    ) -> None:
        self.console = console
        self.metric = metric
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

    def started(self, run: PlannedRun) -> None:
        self.position += 1
        eta = self.eta()
        left = f"  [dim]ETA {format_duration(eta)}[/]" if eta is not None else ""
        self._say(
            f"[bold]run {self.position}/{self.total}[/] {escape(run.describe())} "
            f"[dim]{run.run_id}[/]{left}"
        )

    def finished_run(self, outcome: Outcome) -> None:
        self.finished += 1
        label = f"{escape(outcome.run.method_label)} [dim]{outcome.run.run_id}[/]"
        result = outcome.result
        if result is None:
            self.failed += 1
            self._say(f"  [red]failed[/] {label}: {escape(outcome.error or '')}")
            return
        metric = choose_metric(result.data.task, result.data.train_counts, self.metric).metric
        score = f"{result.test[metric]:.4f}" if metric in result.test else "not computed"
        self._say(
            f"  [green]done[/] {label} in {format_duration(outcome.seconds)}: test {metric} "
            f"{score} (best epoch {result.best_epoch} of {len(result.epochs)})"
        )

    def eta(self) -> float | None:
        """Seconds left by the pace of this session's finished runs; None before the first."""
        if not self.finished:
            return None
        pace = (time.perf_counter() - self._began) / self.finished
        return pace * (self.to_run - self.finished)

    def interrupted(self) -> None:
        self._say(
            f"stopped after {self.finished} of {self.to_run} {self.unit}s; the same command "
            f"continues from here ({_AGAIN[self.unit]})"
        )

    def summary(self) -> None:
        took = format_duration(time.perf_counter() - self._began)
        ok = self.finished - self.failed
        failed = f", [red]{self.failed} failed[/]" if self.failed else ""
        self._say(f"[bold]finished[/]: {ok} {self.unit}s done{failed} in {took}")
