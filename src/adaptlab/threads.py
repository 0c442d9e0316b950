"""How many threads adaptlab computes with on the CPU, and how they wait, chosen before torch
loads so a run beside other work slows by its fair share.

PyTorch's OpenMP threads spin while they wait for each other by default. Beside other busy
processes a spinning thread holds a core the others need, and every step waits for its slowest
thread: measured on 2 cores, a training step took 11-15x its time alone beside one busy thread
where its fair share was 2x (`benchmarks/contention.py`). adaptlab computes on no more threads
than the CPUs it may really use (`adaptlab.cpus`: the affinity and the cgroup quota, which a
container's CPU limit sets and torch does not read), divided among the processes that share
them. A process that does not train sets OpenMP's wait policy to PASSIVE (waiting threads
sleep); a training one keeps OpenMP's default, faster alone, and its loop's thread governor
computes on fewer threads while other work holds its cores (`share_cpus`).

The command line does this for itself and every process it starts (`--nproc`, Ray tasks and
Ray Serve replicas); `--threads N` or `ADAPTLAB_THREADS=N` sets the count, and a user's own
`OMP_NUM_THREADS` and `OMP_WAIT_POLICY` are kept. From Python call `share_cpus()` before the
first `import torch`: the library alone changes nothing of a user's settings.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass, replace

from adaptlab.cpus import CpuBudget, cpu_budget
from adaptlab.errors import ConfigError

THREADS_VARIABLE = "ADAPTLAB_THREADS"
"""The threads each adaptlab process computes with; what `--threads` sets for its children."""
SOURCE_VARIABLE = "ADAPTLAB_THREADS_SOURCE"
"""Why a process started by adaptlab computes on `ADAPTLAB_THREADS` threads, for its record."""
COUNT_VARIABLE = "OMP_NUM_THREADS"
"""OpenMP's thread count, which torch reads for its intra-op threads as it loads."""
WAIT_VARIABLE = "OMP_WAIT_POLICY"
"""OpenMP's wait policy, read once as torch loads: PASSIVE threads sleep while they wait."""
PASSIVE = "PASSIVE"
USER_SOURCES = ("--threads", THREADS_VARIABLE, COUNT_VARIABLE)
"""Where a count the user set comes from; any other source is adaptlab's choice."""
MAX_THREADS = 1024
"""The most threads a process may be given: more than the cores of the machines adaptlab runs
on, so a larger count is a slip (torch would start that many threads, and a count past a C
int OpenMP ignores with a warning)."""


@dataclass(frozen=True)
class ThreadChoice:
    """The threads a process computes with, OpenMP's wait policy, and where the count came
    from (`--threads`, a variable, or the CPU budget); `given` when the user set the count
    (adaptlab then never changes it, `adaptlab.engine.thread_governor`)."""

    threads: int
    wait_policy: str | None
    source: str
    given: bool

    def environment(self) -> dict[str, str]:
        """The variables a process started with this choice needs (before its torch loads)."""
        wait = {} if self.wait_policy is None else {WAIT_VARIABLE: self.wait_policy}
        return {
            THREADS_VARIABLE: str(self.threads),
            SOURCE_VARIABLE: self.source,
            COUNT_VARIABLE: str(self.threads),
            **wait,
        }


def choose_threads(
    requested: int | None = None,
    processes: int = 1,
    environ: Mapping[str, str] = os.environ,
    budget: CpuBudget | None = None,
    passive: bool = True,
) -> ThreadChoice:
    """The threads for each of `processes` processes that share this process's CPUs:
    `requested` (`--threads`), else `ADAPTLAB_THREADS`, else the user's `OMP_NUM_THREADS`, else
    an equal share of the CPU budget's whole CPUs, at least 1. The wait policy is the user's
    `OMP_WAIT_POLICY`, else PASSIVE if `passive`, else OpenMP's default (None)."""
    wait_policy = environ.get(WAIT_VARIABLE) or (PASSIVE if passive else None)
    if requested is not None:
        return ThreadChoice(parse_threads(requested, "--threads"), wait_policy, "--threads", True)
    for variable in (THREADS_VARIABLE, COUNT_VARIABLE):
        if environ.get(variable):
            nested = variable == COUNT_VARIABLE
            count = parse_threads(environ[variable], variable, nested=nested)
            source = environ.get(SOURCE_VARIABLE) if variable == THREADS_VARIABLE else None
            source = source or variable  # a process adaptlab started keeps its parent's reason
            return ThreadChoice(count, wait_policy, source, source in USER_SOURCES)
    budget = budget or cpu_budget()
    threads = max(1, budget.cpus // processes)
    source = budget.describe() + (f", shared by {processes} processes" if processes > 1 else "")
    return ThreadChoice(threads, wait_policy, source, False)


def parse_threads(value: object, name: str = "--threads", *, nested: bool = False) -> int:
    """`value` as a thread count from 1 to `MAX_THREADS`, or one line naming `name`.

    `nested`: `value` may list OpenMP's nested levels, as `OMP_NUM_THREADS=4,2` does (4 threads,
    each starting 2 of its own); torch computes on the first level's count."""
    text = str(value).split(",", 1)[0] if nested else str(value)
    try:
        count = int(text)
    except ValueError:
        count = 0
    if not 1 <= count <= MAX_THREADS or isinstance(value, bool):
        raise ConfigError(
            f"{name} must be a whole number of threads from 1 to {MAX_THREADS}, got {value!r}"
        )
    return count


_chosen: ThreadChoice | None = None
"""What `share_cpus` chose in this process."""


def share_cpus(
    threads: int | None = None,
    *,
    training: bool = False,
    environ: MutableMapping[str, str] = os.environ,
) -> ThreadChoice:
    """Set this process's threads and OpenMP wait policy as the command line does
    (`choose_threads`), before torch loads; what torch will use is returned.

    `training`: for a process that trains through adaptlab's loop, whose thread governor
    lowers the count while other work holds the cores (`adaptlab.engine.thread_governor`):
    OpenMP's default wait policy is then kept, since its waiting threads spin a few
    milliseconds, which on an idle machine makes a training step up to a fifth faster than
    sleeping ones (`benchmarks/contention.py`). Any other process's threads sleep (PASSIVE).

    Torch reads them once, as it loads; called after `import torch` this refuses, naming the
    fix, rather than leave the wait policy silently unchanged."""
    if "torch" in sys.modules:
        raise ConfigError(
            "adaptlab.share_cpus() must run before the first `import torch`: OpenMP reads its "
            "wait policy and thread count once, as torch loads"
        )
    choice = choose_threads(threads, environ=environ, passive=not training)
    environ.update(choice.environment())
    global _chosen
    _chosen = choice
    return choice


def use_threads(threads: int) -> ThreadChoice:
    """Compute on `threads` threads from now on, where torch is loaded already (the command
    line run from Python with `--threads`): the count alone, the wait policy being torch's."""
    import torch

    torch.set_num_threads(threads)
    global _chosen
    _chosen = ThreadChoice(threads, os.environ.get(WAIT_VARIABLE), "--threads", True)
    return _chosen


def chosen_threads() -> ThreadChoice | None:
    """What `share_cpus` chose in this process, None where it was not called."""
    return _chosen


def threads_for_processes(count: int) -> ThreadChoice:
    """The choice for each of `count` processes this one starts on its machine (`--nproc`):
    the count the user gave, else their share of this process's CPUs."""
    chosen = chosen_threads()
    if chosen is None:
        return choose_threads(processes=count)
    if chosen.given:
        return chosen
    return replace(choose_threads(processes=count, environ={}), wait_policy=chosen.wait_policy)


def threads_for_cpus(cpus: float) -> ThreadChoice:
    """The choice for a process a scheduler gives `cpus` CPUs (a Ray task or replica, perhaps on
    another machine): the count the user gave, else those CPUs, whole, at least 1."""
    chosen = chosen_threads() or choose_threads()
    if chosen.given:
        return chosen
    threads = max(1, int(cpus + 1e-9))
    return ThreadChoice(threads, chosen.wait_policy, f"the CPUs Ray gives it: {cpus:g}", False)
