"""The observer a tracked run sets around its training (`adaptlab.engine.events`): it names the
loop's steps and epochs as scalars (`records`) on one rising step and hands them to the
run's sinks (TensorBoard, MLflow).

A sequence trains one stage after another, each counting its steps from 1: each new training
(a new title, or a step count starting over) continues the step where the last one ended, so
the curves of all stages share one axis. The sinks are opened at the first step, so a run
refused before it trains, or a process of a distributed run that is not its main one, opens
no tracker; they learn that step, so a run resumed from a checkpoint (its first step after
the checkpoint's) goes on with what its stopped try recorded instead of starting afresh.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol

from adaptlab.integrations.trackers.records import epoch_scalars, stage_prefix, step_scalars

if TYPE_CHECKING:
    from adaptlab.records.result import EpochRecord

Status = Literal["FINISHED", "FAILED", "KILLED"]
"""How a tracked run ended (MLflow's names): done, failed, or stopped (Ctrl-C)."""


class Sink(Protocol):
    """One open tracker of one run."""

    def scalars(self, values: Mapping[str, float], step: int) -> None:
        """Record `values` at `step` (cheap: called every optimiser step)."""

    def flush(self) -> None:
        """Make what was recorded so far visible (an epoch ended)."""

    def close(self, status: Status, artifact: Path | None) -> None:
        """Finish the run with `status`, keeping `artifact` (a folder) if the tracker can."""


class Reporter:
    """Loop events -> scalars on one rising step, for sinks opened on the first event."""

    def __init__(self, open_sinks: Callable[[int], list[Sink]]) -> None:
        self._open_sinks = open_sinks
        self._sinks: list[Sink] | None = None
        self._title: str | None = None
        self._offset = 0  # steps of the trainings before this one
        self._local = 0  # this training's last step

    @property
    def step(self) -> int:
        """The last step recorded, counted across every training of the run."""
        return self._offset + self._local

    def on_step(self, title: str, step: int, loss: float, learning_rate: float) -> None:
        if title != self._title or step <= self._local:  # a new training starts
            self._offset, self._local, self._title = self.step, 0, title
        self._local = step
        self._record(step_scalars(loss, learning_rate))

    def on_epoch(self, title: str, record: EpochRecord, metric: str) -> None:
        self._record(epoch_scalars(record, stage_prefix(title)), self._offset + record.step)
        for sink in self._sinks or ():
            sink.flush()

    def final(self, values: Mapping[str, float]) -> None:
        """Record a finished run's scores at its last step (nothing if it never trained here)."""
        for sink in self._sinks or ():
            sink.scalars(values, self.step)

    def close(self, status: Status, artifact: Path | None) -> None:
        """Close every sink opened (each even if another fails; the first error is raised)."""
        sinks, self._sinks = self._sinks or [], None
        failure: Exception | None = None
        for sink in sinks:
            try:
                sink.close(status, artifact)
            except Exception as error:  # noqa: BLE001 (the others still close)
                failure = failure or error
        if failure is not None:
            raise failure

    def _record(self, values: Mapping[str, float], step: int | None = None) -> None:
        at = self.step if step is None else step
        if self._sinks is None:
            self._sinks = self._open_sinks(at)
        for sink in self._sinks:
            sink.scalars(values, at)
