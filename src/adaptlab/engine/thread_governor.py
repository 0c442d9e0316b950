"""Fewer threads while other work holds the cores, as many again once it has gone.

Two threads that share two cores with a third busy process wait on each other at every
parallel region, each the slower for the core it shares: measured on 2 cores, one busy Python
thread beside a SmolLM2 LoRA step made it 8.9x slower on two threads at OpenMP's default wait
(they spin), 3.3x slower on two sleeping (PASSIVE) ones, and 1.3x slower on one thread (the
time alone on two; `benchmarks/contention.py` measures adaptlab's loop against the default).
So every `interval` seconds of training the loop asks how many CPUs' worth other work held
(`adaptlab.cpu_load`: work at a lower priority does not count) and computes on the CPUs
left, rounded, between 1 and the count adaptlab chose. A count the user set (`--threads`,
`ADAPTLAB_THREADS`, `OMP_NUM_THREADS`) is never changed, nor one chosen outside adaptlab's
command line.

torch's thread count belongs to the thread that sets it (OpenMP's), so the loop calls `tick`
from the thread that trains.
"""

from __future__ import annotations

import logging
import math
import os
import time

import torch

from adaptlab.cpu_load import OtherWork
from adaptlab.threads import chosen_threads

INTERVAL = 2.0
"""Seconds of training between two readings of the load."""

log = logging.getLogger("adaptlab.train")


def threads_beside(chosen: int, cpus: int, held: float) -> int:
    """Threads to compute with when other work holds `held` of this process's `cpus` CPUs: the
    CPUs left, rounded to the nearest, at least 1 and at most `chosen`."""
    return max(1, min(chosen, math.floor(cpus - held + 0.5)))


class ThreadGovernor:
    """Within `with`, `tick()` after each step sets the threads for the load (nothing where
    adaptlab did not choose the count, or chose 1); on leaving, the chosen count again."""

    def __init__(self, interval: float | None = None, work: OtherWork | None = None) -> None:
        chosen = chosen_threads()
        self.chosen = 0 if chosen is None or chosen.given else chosen.threads
        readable = work is not None or hasattr(os, "sched_getaffinity")  # Linux's /proc
        self.active = readable and self.chosen > 1 and torch.get_num_threads() == self.chosen
        self.interval = INTERVAL if interval is None else interval
        self.work = work
        if self.active and self.work is None:
            self.work = OtherWork(set(os.sched_getaffinity(0)))
        self._read_at = time.monotonic()

    def __enter__(self) -> ThreadGovernor:
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self.active and torch.get_num_threads() != self.chosen:
            torch.set_num_threads(self.chosen)

    def tick(self, step: int) -> None:
        """After step `step`: once `interval` seconds have passed since the last reading, read
        the load and set the threads for it."""
        if not self.active or self.work is None or time.monotonic() - self._read_at < self.interval:
            return
        self._read_at = time.monotonic()
        held = self.work.held()
        if held is None:
            return
        threads = threads_beside(self.chosen, len(self.work.cores), held)
        if threads != torch.get_num_threads():
            torch.set_num_threads(threads)
            log.info(
                "cpu %d threads from step %d: other work held %.1f of %d CPUs",
                *(threads, step, held, len(self.work.cores)),
            )
