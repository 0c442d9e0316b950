"""What the epoch loop tells observers as it trains (experiment trackers, a Trainer bridge):
each optimiser step's loss and learning rate, each epoch's record. Observers are set around a
run with `observing`, not threaded through every caller (a run, a continual stage, a study
cell all reach the one loop); only the main process of a distributed run tells them."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Protocol

from adaptlab.parallel.ranks import is_main_process
from adaptlab.records.result import EpochRecord


class TrainingObserver(Protocol):
    """Sees the loop's progress; `title` names the stage of a sequence ("" for a plain run)."""

    def on_step(self, title: str, step: int, loss: float, learning_rate: float) -> None: ...

    def on_epoch(self, title: str, record: EpochRecord, metric: str) -> None: ...


_OBSERVERS: ContextVar[tuple[TrainingObserver, ...]] = ContextVar(
    "adaptlab_training_observers", default=()
)


@contextmanager
def observing(*observers: TrainingObserver) -> Iterator[None]:
    """Within the block, every training the loop runs is told to `observers` (added to any
    already set)."""
    token = _OBSERVERS.set(_OBSERVERS.get() + observers)
    try:
        yield
    finally:
        _OBSERVERS.reset(token)


def _active() -> tuple[TrainingObserver, ...]:
    return _OBSERVERS.get() if is_main_process() else ()


def tell_step(title: str, step: int, loss: float, learning_rate: float) -> None:
    """Tell the observers that optimiser step `step` (1-based, of this training) ended."""
    for observer in _active():
        observer.on_step(title, step, loss, learning_rate)


def tell_epoch(title: str, record: EpochRecord, metric: str) -> None:
    """Tell the observers that an epoch ended and was scored on dev by `metric`."""
    for observer in _active():
        observer.on_epoch(title, record, metric)
