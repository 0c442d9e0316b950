"""Evaluation split over the processes of a multi-process run: within `shared_evaluation`,
batch i of an evaluation runs on process i mod N and what each process scored is gathered to
all, in order, so every process computes the same metrics (and keeps the same best epoch) for
1/N of the forward passes. A model sharded with FSDP2 keeps evaluating whole on every process:
its forward passes are collective, so every process must run each one.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TypeVar

import torch.distributed as dist
from torch import nn

from adaptlab.parallel.ranks import process_count, process_rank
from adaptlab.parallel.sharded import is_sharded

T = TypeVar("T")

_SHARED: ContextVar[bool] = ContextVar("adaptlab_shared_evaluation", default=False)


@contextmanager
def shared_evaluation(model: nn.Module) -> Iterator[None]:
    """Within the block, evaluations of `model` are split over the group's processes (each
    process must run the same evaluations); alone or sharded, nothing changes."""
    token = _SHARED.set(process_count() > 1 and not is_sharded(model))
    try:
        yield
    finally:
        _SHARED.reset(token)


def my_turn(batch: int) -> bool:
    """Whether this process runs evaluation batch `batch` (numbered from 0)."""
    return not _SHARED.get() or batch % process_count() == process_rank()


def gathered(mine: list[tuple[int, T]]) -> list[T]:
    """Every process's (batch number, result) pairs, in batch order (this process's alone when
    the evaluation is not shared)."""
    everything = mine
    if _SHARED.get():
        parts: list[list[tuple[int, T]] | None] = [None] * process_count()
        dist.all_gather_object(parts, mine)
        everything = [pair for part in parts for pair in part or []]
    return [result for _, result in sorted(everything, key=lambda pair: pair[0])]
