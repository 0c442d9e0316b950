"""Executors run planned runs and yield each outcome as it finishes; the caller writes the store.

The local executor runs one run after another in this process (the default). The Ray executor
(`ray_executor.py`) runs them as Ray tasks. Neither writes the store: the driver does, so a
store has exactly one writer.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Protocol

import torch

from adaptlab.engine.run import execute
from adaptlab.errors import AdaptlabError
from adaptlab.integrations.trackers.choice import Tracking
from adaptlab.integrations.trackers.session import track
from adaptlab.records.result import RunResult
from adaptlab.records.spec import RunSpec
from adaptlab.study.analysis import AnalysisRequest
from adaptlab.study.planner import PlannedRun

Started = Callable[[PlannedRun], None]
"""Called as a run is handed to a worker, before it starts training."""


@dataclass(frozen=True)
class Outcome:
    """A finished run: its result, or the one-line error it failed with; seconds it took."""

    run: PlannedRun
    result: RunResult | None
    error: str | None
    seconds: float


class Executor(Protocol):
    """Runs planned runs, calling `started` for each, yielding outcomes as they finish."""

    name: str

    def run(
        self, runs: Sequence[PlannedRun], started: Started
    ) -> Generator[Outcome, None, None]: ...


def run_one(
    spec: RunSpec,
    progress: bool,
    analysis: AnalysisRequest | None = None,
    out: str | None = None,
    tracking: Tracking | None = None,
) -> tuple[RunResult | None, str | None, float]:
    """`execute(spec)` -> (result, None, seconds); a user error or out-of-memory is (None, line, s).

    `analysis` names analyses to run on the trained model (their results join the result).
    `out`: the run folder to write (for runs other runs build on). `tracking`: the experiment
    trackers the run reports to, opened here, where it trains. Any other exception is a bug
    and propagates.
    """
    started = time.perf_counter()
    hook = analysis.hook() if analysis is not None else None
    try:
        with track(tracking, spec.to_dict()) as report:
            done = execute(spec, out, progress=progress, overwrite=out is not None, on_trained=hook)
            report.finished_run(done, out)
        result: RunResult | None = done
        error = None
    except (AdaptlabError, torch.OutOfMemoryError) as failure:
        result, error = None, one_line(failure)
    return result, error, time.perf_counter() - started


def one_line(error: BaseException) -> str:
    """The first line of an error's message, or its type name when it has none."""
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


class LocalExecutor:
    """Runs one run after another in this process, each with its own progress bar."""

    name = "local"

    def __init__(self, progress: bool = True) -> None:
        self.progress = progress

    def run(self, runs: Sequence[PlannedRun], started: Started) -> Generator[Outcome, None, None]:
        for run in runs:
            started(run)
            result, error, seconds = run_one(
                run.spec, self.progress, run.analysis, run.out, run.tracking
            )
            yield Outcome(run, result, error, seconds)
