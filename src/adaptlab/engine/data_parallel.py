"""Data-parallel training of one run over the processes of a `torchrun` group: every process
builds the same global batch (the same examples, the same random draws, so its generator stays
in step with the others and with a one-process run), trains on its contiguous share, and
PyTorch's DistributedDataParallel averages the gradients of the trainable tensors only: it runs
over a list of them, driven by hooks on the model itself as `torch.distributed`'s composable
`replicate` drives it, so no objective changes how it calls the model.

The share's loss is weighted so the averaged gradient is the global batch's: with n_r loss terms
on process r of W and N in all, process r back-propagates mean_r * n_r * W / N, and
(1/W) sum_r of it is the mean over all N terms. A term every process adds alike (a continual
strategy's penalty) comes out once, since sum_r n_r / N = 1.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Protocol, runtime_checkable

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from adaptlab.engine.sharding import reshard
from adaptlab.parallel.ranks import process_count, process_rank
from adaptlab.parallel.sharded import is_sharded


@runtime_checkable
class CountsLossTerms(Protocol):
    """An objective whose mean loss is over something other than its batch's examples (tokens,
    say) tells how many terms a batch has, so shares of different sizes weigh right."""

    def loss_terms(self, batch: Any) -> int: ...


class OneProcess:
    """A run on one process: the batch is its own share, nothing is exchanged."""

    processes = 1
    bytes_per_step = 0

    def share(self, objective: object, batch: Any) -> tuple[Any, float]:
        """This process's part of `batch` and the weight its mean loss is multiplied by."""
        return batch, 1.0

    def mean(self, value: float, weight: float) -> float:
        """The global batch's mean loss from this process's (for logs and reports)."""
        return value


class Processes(OneProcess):
    """A run over the processes of the group: contiguous shares, weighted losses."""

    def __init__(self, device: torch.device, bytes_per_step: int) -> None:
        self.device, self.bytes_per_step = device, bytes_per_step
        self.processes = process_count()

    def share(self, objective: object, batch: Any) -> tuple[Any, float]:
        size = batch_size_of(batch)
        rank = process_rank()
        start, stop = rank * size // self.processes, (rank + 1) * size // self.processes
        if start == stop:  # a short last batch: run the last example, weigh it 0
            part, terms = _cut(batch, size, size - 1, size), 0
        else:
            part = _cut(batch, size, start, stop)
            terms = stop - start
            if isinstance(objective, CountsLossTerms):
                terms = objective.loss_terms(part)
        total = torch.tensor([float(terms)], device=self.device)
        dist.all_reduce(total)
        return part, terms * self.processes / max(float(total.item()), 1.0)

    def mean(self, value: float, weight: float) -> float:
        total = torch.tensor([value * weight], device=self.device)
        dist.all_reduce(total)
        return float(total.item()) / self.processes


@contextmanager
def data_parallel(model: nn.Module, device: torch.device) -> Iterator[OneProcess]:
    """Within the block, train `model` on this process's shares with its trainable tensors'
    gradients averaged over the group (a single process: unchanged).

    The trainable tensors start as rank 0's; the frozen base is not broadcast, since every
    process loaded the same weights. DistributedDataParallel runs over the trainable tensors
    alone, its forward hooks on `model` itself and removed on exit, so a continual stage with
    new adapters starts afresh and the frozen base never reaches the all-reduce. A model
    sharded with FSDP2 (`adaptlab.engine.sharding`) takes its shares the same way."""
    if process_count() == 1:
        yield OneProcess()
        return
    if is_sharded(model):  # FSDP2 reduce-scatters the gradients itself
        try:
            yield Processes(device, gradient_bytes(model))  # reduce-scattered
        finally:
            reshard(model)  # the best epoch is put back into the sharded tensors
        return
    trained = [p for p in model.parameters() if p.requires_grad]
    for parameter in trained:
        dist.broadcast(parameter.data, src=0)
    engine = DistributedDataParallel(
        nn.ParameterList(trained),
        device_ids=[device] if device.type == "cuda" else None,
        init_sync=False,
        forward_sync_buffers=False,
    )

    def before(module: nn.Module, args: Any, kwargs: Any) -> Any:
        return engine._pre_forward(*args, **kwargs)

    def after(module: nn.Module, args: Any, output: Any) -> Any:
        return engine._post_forward(output)

    hooks = [
        model.register_forward_pre_hook(before, with_kwargs=True, prepend=True),
        model.register_forward_hook(after),
    ]
    try:
        yield Processes(device, gradient_bytes(model))
    finally:
        for hook in hooks:
            hook.remove()


def gradient_bytes(model: nn.Module) -> int:
    """Bytes of the trained tensors' gradients, what a step of several processes exchanges."""
    return sum(p.numel() * p.element_size() for p in model.parameters() if p.requires_grad)


def _cut(value: Any, size: int, start: int, stop: int) -> Any:
    """`value` with its tensors and lists of first length `size` cut to [start, stop)."""
    if isinstance(value, torch.Tensor):
        return value[start:stop] if value.ndim and value.shape[0] == size else value
    if isinstance(value, dict):
        return {k: _cut(v, size, start, stop) for k, v in value.items()}
    if isinstance(value, tuple):
        return tuple(_cut(v, size, start, stop) for v in value)
    if isinstance(value, list):
        if len(value) == size:
            return value[start:stop]
        return [_cut(v, size, start, stop) for v in value]
    return value


def batch_size_of(batch: Any) -> int:
    """How many examples a batch holds: the first length of its first tensor or list."""
    if isinstance(batch, torch.Tensor):
        return int(batch.shape[0])
    if isinstance(batch, dict):
        return batch_size_of(next(iter(batch.values())))
    if isinstance(batch, tuple):
        return batch_size_of(batch[0])
    if isinstance(batch, list):
        return len(batch)
    raise TypeError(f"cannot tell the size of a batch of type {type(batch).__name__}")
