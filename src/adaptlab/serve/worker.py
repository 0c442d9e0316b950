"""The model thread: every forward pass and every model change runs on this one thread.

Models with adapter state are not thread-safe (activating an adapter swaps weights in
place), so the HTTP side only queues work here. Prediction requests that arrive within
`max_wait` seconds of the first, up to `max_batch` texts, form one batch; the batch is
grouped by adapter, and each adapter's texts run as one contiguous slice (one call of
`run_group`), in the order the adapters first appear. Other work (a registry reload) runs
between batches. While a background task is busy (text generation: `Background`), the
thread runs one step of it after each item it takes, and takes items without waiting.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Protocol

from adaptlab.tasks.prediction import Prediction

RunGroup = Callable[[str, list[str]], list[Prediction]]
"""Run one adapter on texts: its predictions, in order."""
BatchObserver = Callable[[int, int], None]
"""Told (texts, adapters) of every batch run."""


class Background(Protocol):
    """Work done a step at a time on the model thread, between the queued items."""

    def busy(self) -> bool:
        """Whether a step has work to do."""

    def step(self) -> None:
        """Do one step of the work (one token for every sequence generating)."""


@dataclass
class _Job:
    adapter: str
    texts: Sequence[str]
    future: Future[list[Prediction]] = field(default_factory=Future)


@dataclass
class _Call:
    function: Callable[[], Any]
    future: Future[Any] = field(default_factory=Future)


_STOP = object()
_WAKE = object()


class ModelThread:
    """Runs batches of predictions, and other model work, on one daemon thread."""

    def __init__(
        self,
        run_group: RunGroup,
        max_batch: int,
        max_wait: float,
        observe: BatchObserver | None = None,
        background: Background | None = None,
    ) -> None:
        self._run_group = run_group
        self._background = background
        self._max_batch = max_batch
        self._max_wait = max_wait
        self._observe = observe
        self._queue: queue.Queue[Any] = queue.Queue()
        self._thread = threading.Thread(target=self._loop, name="adaptlab-model", daemon=True)
        self._thread.start()

    def predict(self, adapter: str, texts: Sequence[str]) -> Future[list[Prediction]]:
        """Queue `texts` for `adapter`; the future holds one prediction per text."""
        job = _Job(adapter, texts)
        self._queue.put(job)
        return job.future

    def call(self, function: Callable[[], Any]) -> Future[Any]:
        """Run `function` on the model thread between batches."""
        call = _Call(function)
        self._queue.put(call)
        return call.future

    def wake(self) -> None:
        """The background task has work now: step it even if nothing else is queued."""
        self._queue.put(_WAKE)

    def close(self) -> None:
        """Finish what is queued, then stop the thread."""
        self._queue.put(_STOP)
        self._thread.join()

    def _loop(self) -> None:
        background = self._background
        while True:
            try:
                waiting = background is None or not background.busy()
                item = self._queue.get() if waiting else self._queue.get_nowait()
            except queue.Empty:
                item = _WAKE
            if item is _STOP:
                return
            if isinstance(item, _Call):
                _settle(item.future, item.function)
            elif isinstance(item, _Job):
                batch, after = self._collect(item)
                self._run(batch)
                if after is _STOP:
                    return
                if isinstance(after, _Call):
                    _settle(after.future, after.function)
            if background is not None and background.busy():
                background.step()

    def _collect(self, first: _Job) -> tuple[list[_Job], Any]:
        """`first` and the jobs that follow within max_wait, up to max_batch texts; and the
        first non-prediction item met, which runs after the batch."""
        batch, count = [first], len(first.texts)
        deadline = time.monotonic() + self._max_wait
        while count < self._max_batch:
            left = deadline - time.monotonic()
            try:
                item = self._queue.get(timeout=left) if left > 0 else self._queue.get_nowait()
            except queue.Empty:
                break
            if not isinstance(item, _Job):
                return batch, item
            batch.append(item)
            count += len(item.texts)
        return batch, None

    def _run(self, batch: list[_Job]) -> None:
        groups: dict[str, list[_Job]] = {}
        for job in batch:
            groups.setdefault(job.adapter, []).append(job)
        if self._observe is not None:
            self._observe(sum(len(j.texts) for j in batch), len(groups))
        for adapter, jobs in groups.items():
            texts = [text for job in jobs for text in job.texts]
            try:
                predictions = self._run_group(adapter, texts)
            except BaseException as error:  # every waiting request hears of it
                for job in jobs:
                    job.future.set_exception(error)
                continue
            start = 0
            for job in jobs:
                job.future.set_result(predictions[start : start + len(job.texts)])
                start += len(job.texts)


def _settle(future: Future[Any], function: Callable[[], Any]) -> None:
    try:
        future.set_result(function())
    except BaseException as error:
        future.set_exception(error)
