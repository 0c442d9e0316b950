"""A run reported to its trackers: `with track(tracking, spec) as report:` around the call that
trains (`execute`, `run_sequence`), then `report.finished_run(result, out)` or
`report.finished_sequence(result)` with what it returned.

Entering the block checks, before the run trains, that each tracker can record where it writes
(`destinations`). Inside it the loop tells the trackers each step and epoch; on leaving it each
tracker is closed as finished, failed (an error) or killed (Ctrl-C). With no tracking (None)
the block does nothing, and neither TensorBoard nor MLflow is imported.
"""

from __future__ import annotations

import logging
import os
from contextlib import ExitStack
from functools import partial
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from adaptlab.integrations.trackers.choice import Tracking, require_installed
from adaptlab.integrations.trackers.destinations import check_destinations
from adaptlab.integrations.trackers.records import flat_params, run_scalars, sequence_scalars
from adaptlab.integrations.trackers.reporter import Reporter, Sink, Status

if TYPE_CHECKING:
    from collections.abc import Mapping

    from adaptlab.continual.result import SequenceResult
    from adaptlab.records.result import RunResult


log = logging.getLogger("adaptlab.trackers")


class TrackedRun:
    """The trackers of one run, opened at its first training step (see `track`)."""

    def __init__(self, tracking: Tracking | None, spec: Mapping[str, Any]) -> None:
        self.tracking = tracking
        self._spec = dict(spec)
        self._reporter = Reporter(partial(_open_sinks, tracking, self._spec))
        self._artifact: Path | None = None
        self._stack = ExitStack()

    def __enter__(self) -> TrackedRun:
        if self.tracking is not None:
            from adaptlab.engine.events import observing

            require_installed(self.tracking.trackers)
            check_destinations([(self.tracking, self._spec)])
            self._stack.enter_context(observing(self._reporter))
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self._stack.close()
        status: Status = (
            "FINISHED" if error is None else "KILLED" if kind is KeyboardInterrupt else "FAILED"
        )
        try:
            self._reporter.close(status, self._artifact)
        except Exception as failure:
            if error is None:
                raise
            log.warning("the run's trackers did not close: %s", failure)  # the run's error wins

    def finished_run(self, result: RunResult, out: str | os.PathLike[str] | None) -> None:
        """Record a run's test scores; its adapter folder (if `out` was written) goes to MLflow."""
        from adaptlab.engine.outputs import ADAPTER_FOLDER

        self._reporter.final(run_scalars(result))
        if out is not None:
            self._artifact = Path(out) / ADAPTER_FOLDER

    def finished_sequence(self, result: SequenceResult) -> None:
        """Record a sequence's final scores on every stage, and its summary."""
        self._reporter.final(sequence_scalars(result))


def _open_sinks(tracking: Tracking | None, spec: Mapping[str, Any], first: int) -> list[Sink]:
    """Each tracker of the run, opened at step `first` (after 1: a resumed run); those opened
    are closed again if one fails."""
    opened: list[Sink] = []
    if tracking is None:
        return opened
    try:
        for name in tracking.trackers:
            if name == "tensorboard":
                from adaptlab.integrations.trackers.tensorboard import TensorBoardSink

                opened.append(TensorBoardSink(Path(tracking.log_dir), spec, first))
            else:
                from adaptlab.integrations.trackers.mlflow import MlflowSink

                opened.append(MlflowSink(tracking, flat_params(spec), resumed=first > 1))
    except BaseException:
        for sink in opened:
            sink.close("FAILED", None)
        raise
    return opened


def track(tracking: Tracking | None, spec: Mapping[str, Any]) -> TrackedRun:
    """The trackers of the run `spec` (its JSON form, kept as parameters) as a context."""
    return TrackedRun(tracking, spec)
