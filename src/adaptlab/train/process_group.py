"""One run on several processes: starting them (`adaptlab train --nproc N`) through PyTorch's
elastic launcher, the engine `torchrun` runs, and joining their group inside each one (under
`--nproc`, `torchrun -m adaptlab train ...`, `accelerate launch` or a Ray Train worker alike).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import torch
import torch.distributed as dist

from adaptlab.errors import AdaptlabError

GROUP_VARIABLES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")


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


def launch_processes(count: int, arguments: Sequence[str]) -> None:
    """Run `adaptlab ARGUMENTS` on `count` processes of this machine, as `torchrun
    --standalone --nproc-per-node COUNT` would, and wait; a process that fails stops the others
    and ends this with one line naming its rank."""
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
    threads = os.environ.get("OMP_NUM_THREADS")  # the processes share this machine's cores
    os.environ["OMP_NUM_THREADS"] = threads or str(max(1, (os.cpu_count() or 1) // count))
    try:
        elastic_launch(config, sys.executable)("-m", "adaptlab", *arguments)
    except ChildFailedError as failed:
        rank, failure = failed.get_first_failure()
        raise WorkerFailed(
            f"process of rank {rank} of {count} ended with exit code {failure.exitcode}"
            f"{' (' + failure.signal_name() + ')' if failure.exitcode < 0 else ''}; "
            "the run was stopped and its folder not written"
        ) from None
    finally:
        if threads is None:
            del os.environ["OMP_NUM_THREADS"]
