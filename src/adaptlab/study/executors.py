"""Executors run planned items (runs or sequences) and yield each outcome as it finishes; the
caller writes the store.

The local executor runs one item after another in this process (the default). The Ray executor
(`ray_executor.py`) runs each as a Ray task. Neither writes the store: the driver does, so a
store has exactly one writer.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Generator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypeVar

import torch

from adaptlab.continual.result import StageOutcome
from adaptlab.errors import AdaptlabError, one_line
from adaptlab.integrations.trackers.session import track
from adaptlab.records.result import RunResult
from adaptlab.records.spec import RunSpec
from adaptlab.runs.run import execute
from adaptlab.study.planned import Outcome, Planned, R

if TYPE_CHECKING:
    from adaptlab.integrations.trackers.choice import Tracking
    from adaptlab.study.analysis import AnalysisRequest

T = TypeVar("T")

Started = Callable[[Planned[R]], None]
"""Called as an item is handed to a worker, before it starts training."""

StageFinished = Callable[[Planned[R], int, StageOutcome], None]
"""Called with each stage an item finished (its index from 0): as it ends when the item runs
in this process, else when its outcome comes back, before the outcome."""

Stages = tuple[tuple[int, StageOutcome], ...]
"""The stages an item finished where it ran, each with its index."""


class Executor(Protocol):
    """Runs planned items, calling `started` for each and `stage_done` for each stage one
    finishes, yielding outcomes as they finish."""

    name: str

    def run(
        self, runs: Sequence[Planned[R]], started: Started[R], stage_done: StageFinished[R]
    ) -> Generator[Outcome[R], None, None]: ...


def attempted(work: Callable[[], T]) -> tuple[T | None, str | None, float]:
    """(`work()`, None, seconds); a user error or out-of-memory is (None, its line, seconds).
    Any other exception is a bug and propagates."""
    started = time.perf_counter()
    try:
        done: T | None = work()
        error = None
    except (AdaptlabError, torch.OutOfMemoryError) as failure:
        done, error = None, one_line(failure)
    return done, error, time.perf_counter() - started


def run_one(
    spec: RunSpec,
    progress: bool,
    analysis: AnalysisRequest | None = None,
    out: str | None = None,
    tracking: Tracking | None = None,
) -> tuple[RunResult | None, str | None, float]:
    """`execute(spec)` -> (result, None, seconds); a user error or out-of-memory is (None, line, s).

    `analysis` names analyses to run on the trained model (their results join the result),
    and the lm-eval tasks to score it on (lm-eval's results file goes in `out` too).
    `out`: the run folder to write (for runs other runs build on). `tracking`: the experiment
    trackers the run reports to, opened here, where it trains.
    """
    hook = analysis.hook() if analysis is not None else None
    harness = analysis.harness if analysis is not None else None

    def train() -> RunResult:
        scorer = harness.scorer(spec, out) if harness is not None else None  # before training
        with track(tracking, spec.to_dict()) as report:
            done = execute(
                spec,
                out,
                progress=progress,
                overwrite=out is not None,
                on_trained=hook,
                on_trained_lm=scorer,
            )
            if scorer is not None and out is not None:
                scorer.write(Path(out))
            report.finished_run(done, out)
        return done

    return attempted(train)


def run_collecting(run: Planned[R]) -> tuple[Outcome[R], Stages]:
    """Execute `run` where its stages cannot reach the driver (a Ray task): no progress bar,
    its finished stages handed back with its outcome."""
    stages: list[tuple[int, StageOutcome]] = []
    outcome = run.execute(False, lambda index, stage: stages.append((index, stage)))
    return outcome, tuple(stages)


class LocalExecutor:
    """Runs one item after another in this process, each with its own progress bar."""

    name = "local"

    def __init__(self, progress: bool = True) -> None:
        self.progress = progress

    def run(
        self, runs: Sequence[Planned[R]], started: Started[R], stage_done: StageFinished[R]
    ) -> Generator[Outcome[R], None, None]:
        for run in runs:
            started(run)
            yield run.execute(self.progress, functools.partial(stage_done, run))
