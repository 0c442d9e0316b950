"""One run on several processes: starting them (`adaptlab train --nproc N`) through PyTorch's
elastic launcher, the engine `torchrun` runs, and joining their group inside each one (under
`--nproc`, `torchrun -m adaptlab train ...`, `accelerate launch` or a Ray Train worker alike).

The processes a launch starts end with their launcher, even one killed with SIGKILL
and their errors are told once, by the launcher (`adaptlab.engine.launched`).
"""

from __future__ import annotations

import logging
import os
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import torch
import torch.distributed as dist

from adaptlab.cpus import cpu_budget
from adaptlab.engine.launched import (
    ERRORS_VARIABLE,
    LAUNCHER_VARIABLE,
    ProcessError,
    read_errors,
    user_mistake,
)
from adaptlab.errors import AdaptlabError, ConfigError
from adaptlab.threads import threads_for_processes

if TYPE_CHECKING:
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError

GROUP_VARIABLES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")
AGENT_LOGGERS = ("torch.distributed.elastic", "torch.distributed.launcher")
"""Where PyTorch's elastic agent logs (a process failed, the others are being stopped)."""


class WorkerFailed(AdaptlabError):
    """A process of a multi-process run died; the others were stopped with it."""


def in_launched_group() -> bool:
    """Whether this process was started as one of several by a launcher (torchrun's variables)."""
    return int(os.environ.get("WORLD_SIZE", "1")) > 1


@contextmanager
def process_group(device: torch.device) -> Iterator[torch.device]:
    """Within the block this process is in its launcher's group (gloo on the CPU, NCCL on
    GPUs, one GPU per local rank); yields the device it trains on. Without a launcher, or with
    a group its caller already made, nothing changes."""
    if not in_launched_group() or dist.is_initialized():
        yield device
        return
    if device.type == "cuda":
        device = torch.device("cuda", int(os.environ["LOCAL_RANK"]) % torch.cuda.device_count())
        torch.cuda.set_device(device)
        dist.init_process_group("nccl", device_id=device)
    else:
        dist.init_process_group("gloo")
    try:
        yield device
    finally:
        dist.destroy_process_group()


def check_process_count(count: int, device: torch.device, oversubscribe: bool) -> None:
    """Fail unless this machine holds `count` processes training on `device`: one GPU each on
    CUDA; on the CPU at most one per usable CPU (its affinity and cgroup quota, `adaptlab.cpus`),
    unless `oversubscribe` (--oversubscribe)."""
    if device.type == "cuda":
        gpus = torch.cuda.device_count()
        if count > gpus:
            raise ConfigError(
                f"--nproc {count}: each process needs a GPU of its own and this machine has "
                f"{gpus}; give --nproc {gpus} at most, or --device cpu"
            )
    elif count > (cpus := cpu_budget().cpus) and not oversubscribe:
        raise ConfigError(
            f"--nproc {count} is more processes than the {cpus} CPUs this command may "
            f"run on; give --nproc {cpus} at most, or add --oversubscribe to share them"
        )


def launch_processes(count: int, arguments: Sequence[str]) -> None:
    """Run `adaptlab ARGUMENTS` on `count` processes of this machine, as `torchrun
    --standalone --nproc-per-node COUNT` would, and wait. A process that fails stops the
    others, and this ends with one error: a user's mistake a process found, or a line naming
    the process that failed first (after its traceback, for any other error)."""
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.launcher.api import LaunchConfig, elastic_launch

    config = LaunchConfig(
        min_nodes=1,
        max_nodes=1,
        nproc_per_node=count,
        run_id=f"adaptlab-{os.getpid()}",
        rdzv_backend="c10d",
        rdzv_endpoint="localhost:0",
        max_restarts=0,
        monitor_interval=0.2,
    )
    with tempfile.TemporaryDirectory(prefix="adaptlab-launch-") as errors:
        variables = {
            **threads_for_processes(count).environment(),  # they share this machine's CPUs
            LAUNCHER_VARIABLE: str(os.getpid()),
            ERRORS_VARIABLE: errors,
        }
        try:
            with _environment(variables), _agent_quiet():
                elastic_launch(config, sys.executable)("-m", "adaptlab", *arguments)
        except ChildFailedError as failed:
            raise _launch_failure(failed, count, read_errors(Path(errors))) from None


def _launch_failure(
    failed: ChildFailedError, count: int, errors: list[ProcessError]
) -> AdaptlabError:
    """The error a failed launch ends with (`launch_processes`); another error's traceback is
    written to stderr first, as the process would have written it."""
    mistake = user_mistake(errors)
    if mistake is not None:
        return mistake
    rank = failed.get_first_failure()[0]  # the first the agent saw, by the second
    killed = [
        each
        for each, failure in sorted(failed.failures.items())
        if failure.exitcode < 0 and failure.signal_name() != "SIGTERM"  # the agent stops with it
    ]
    if killed:  # a process killed from outside: the others' errors followed from it
        rank = killed[0]
    elif errors and rank in {error.rank for error in errors}:
        rank = errors[0].rank  # of the errors raised, the first (by the clock)
    failure = failed.failures.get(rank)
    exitcode = failure.exitcode if failure is not None else 1
    named = f" ({failure.signal_name()})" if failure is not None and exitcode < 0 else ""
    for error in errors:
        if error.rank == rank:
            sys.stderr.write(error.trace)
    return WorkerFailed(
        f"process of rank {rank} of {count} ended with exit code {exitcode}{named}; "
        "the run was stopped and its folder not written"
    )


@contextmanager
def _environment(variables: Mapping[str, str]) -> Iterator[None]:
    """Within the block these environment variables are set (the processes inherit them);
    after it each is as it was."""
    saved = {name: os.environ.get(name) for name in variables}
    os.environ.update(variables)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                del os.environ[name]
            else:
                os.environ[name] = value


@contextmanager
def _agent_quiet() -> Iterator[None]:
    """Within the block the elastic agent's own log lines are held back (a process failed, the
    others are stopped): the launch ends in one error of its own instead."""
    held = logging.NullHandler()
    loggers = [logging.getLogger(name) for name in AGENT_LOGGERS]
    propagate = [logger.propagate for logger in loggers]
    for logger in loggers:
        logger.addHandler(held)
        logger.propagate = False
    try:
        yield
    finally:
        for logger, was in zip(loggers, propagate, strict=True):
            logger.removeHandler(held)
            logger.propagate = was
