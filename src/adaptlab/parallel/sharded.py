"""Whether a model is sharded over the processes (FSDP2's `fully_shard` makes it an
`FSDPModule`): its forward passes are then collective, every process runs each one."""

from __future__ import annotations

from torch import nn


def is_sharded(model: nn.Module) -> bool:
    """Whether `model` was sharded with FSDP2."""
    from torch.distributed.fsdp import FSDPModule

    return isinstance(model, FSDPModule)
