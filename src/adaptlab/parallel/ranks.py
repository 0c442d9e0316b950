"""Which process of a distributed run this is: only the main one writes files and tells
observers; a run on one process is its own main process."""

from __future__ import annotations

import os

import torch.distributed as dist


def process_rank() -> int:
    """This process's rank in its process group, or in the one its launcher (torchrun) set up
    before the group exists or after it ended; 0 alone."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank()
    return int(os.environ.get("RANK", "0"))


def process_count() -> int:
    """How many processes train this run (1 without a process group)."""
    return dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1


def is_main_process() -> bool:
    """Whether this process writes the run's files, store rows, progress and reports."""
    return process_rank() == 0
