"""`--shard`: the model's parameters sharded over the processes of the group with FSDP2
(`torch.distributed.fsdp.fully_shard`), each transformer block one unit and the rest of the
model the root one. A block's weights are gathered for its forward and backward and freed
after; the frozen base is never reduced, the trained tensors' gradients are reduce-scattered
(averaged, as data parallelism averages them) and their optimizer state stays sharded.

The adapter is written by the first process alone, so when the run is over every process
gathers the adapter's tensors (small) back into whole ones; the frozen base stays sharded.
"""

from __future__ import annotations

import torch.distributed as dist
from torch import nn
from torch.distributed.tensor import DTensor

from adaptlab.backbone.discovery import find_backbone
from adaptlab.backbone.parts import get_module
from adaptlab.errors import ConfigError
from adaptlab.methods.handle import AdaptHandle
from adaptlab.parallel.ranks import process_count


def shard_model(model: nn.Module) -> None:
    """Shard `model` over the process group: every block, then the whole model. Every process
    holds the same weights first (the trained tensors broadcast from the first)."""
    if process_count() == 1:
        raise ConfigError("--shard needs several processes: add --nproc N or start with torchrun")
    dtypes = {p.dtype for p in model.parameters()}
    if len(dtypes) > 1:
        names = ", ".join(sorted(str(d).removeprefix("torch.") for d in dtypes))
        raise ConfigError(
            f"--shard needs one dtype for the whole model, this one mixes {names}; "
            "drop --base-dtype or --quantize"
        )
    from torch.distributed.fsdp import fully_shard

    for parameter in model.parameters():
        if parameter.requires_grad:
            dist.broadcast(parameter.data, src=0)
    for block in find_backbone(model).blocks:
        fully_shard(get_module(model, block.name))
    fully_shard(model)


def gather_adapter(handle: AdaptHandle) -> None:
    """Make the tensors of `handle`'s adapter whole again in its sharded model, on every
    process (each must call it), so the first process alone can save them; the base stays
    sharded and the model is not run again."""
    model = handle.model
    reshard(model)
    names = set(handle.inserted_tensors()) | set(handle.owned)
    for name, parameter in list(model.named_parameters()):
        if name not in names or not isinstance(parameter, DTensor):
            continue
        whole = nn.Parameter(parameter.full_tensor().detach(), parameter.requires_grad)
        owner, _, leaf = name.rpartition(".")
        setattr(get_module(model, owner) if owner else model, leaf, whole)
        if name in handle.owned:
            handle.owned[name] = whole


def reshard(model: nn.Module) -> None:
    """Put every unit of the sharded `model` back in its sharded state: after a forward pass
    without a backward one (an evaluation) the root unit keeps its gathered copy, which a
    change to the sharded tensors (the best epoch put back) would not reach."""
    from torch.distributed.fsdp import FSDPModule

    for module in model.modules():
        if isinstance(module, FSDPModule):
            module.reshard()
