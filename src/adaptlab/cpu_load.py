"""How much of this process's CPUs other work holds, read from Linux's /proc/stat: the CPU time
its cores spent on anything but idling, less this process's own, over the time since the last
reading.

Work at a lower priority does not count: a process at nice 10 yields its core to this one, so
it holds nothing this process wants. (The kernel counts a niced process's user time apart, in
/proc/stat's `nice` column; were this process niced itself, its own time would be there too,
and all work counts.)
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

PROC_STAT = Path("/proc/stat")
_USER, _NICE, _SYSTEM, _IDLE, _IOWAIT, _IRQ, _SOFTIRQ, _STEAL = range(8)


def busy_seconds(cores: set[int], counts_niced: bool, stat: Path = PROC_STAT) -> float | None:
    """The CPU seconds `cores` have spent busy since boot (user, system, interrupts, time the
    hypervisor took: `steal`), with niced user time only if `counts_niced`; None where
    /proc/stat cannot be read."""
    try:
        lines = stat.read_text(encoding="ascii").splitlines()
    except OSError:
        return None
    columns = (_USER, _SYSTEM, _IRQ, _SOFTIRQ, _STEAL) + ((_NICE,) if counts_niced else ())
    ticks = 0
    for line in lines:
        name, _, values = line.partition(" ")
        if name.startswith("cpu") and name[3:].isdigit() and int(name[3:]) in cores:
            fields = [int(value) for value in values.split()]
            ticks += sum(fields[column] for column in columns if column < len(fields))
    return ticks / os.sysconf("SC_CLK_TCK")


class OtherWork:
    """Each `held()` reading: how many of `cores`' CPUs other work kept busy since the last."""

    def __init__(
        self,
        cores: set[int],
        stat: Path = PROC_STAT,
        clock: Callable[[], float] = time.monotonic,
        own: Callable[[], float] = time.process_time,
    ) -> None:
        self.cores, self.stat, self.clock, self.own = cores, stat, clock, own
        self.counts_niced = os.getpriority(os.PRIO_PROCESS, 0) > 0
        self._last = self._reading()

    def _reading(self) -> tuple[float, float, float] | None:
        busy = busy_seconds(self.cores, self.counts_niced, self.stat)
        return None if busy is None else (self.clock(), busy, self.own())

    def held(self) -> float | None:
        """CPUs' worth (0 to the cores' count) other work held since the last reading; None on
        the first, or where /proc/stat cannot be read."""
        last, now = self._last, self._reading()
        self._last = now
        if last is None or now is None or now[0] <= last[0]:
            return None
        others = (now[1] - last[1]) - (now[2] - last[2])
        return min(float(len(self.cores)), max(0.0, others / (now[0] - last[0])))
