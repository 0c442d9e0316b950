"""Activation checkpointing and activation offloading: training memory traded for compute.

Checkpointing keeps only each transformer layer's input for the backward pass and runs the
layer's forward again when its gradient is needed (transformers' own per-layer checkpointing,
in PyTorch's non-reentrant form: it re-runs the inserted adapter modules and forward hooks of
the layer with it, needs no input that requires grad, and restores the dropout RNG, so the
gradients equal those of training without it). Offloading moves every tensor the backward
pass keeps to host memory (pinned on a GPU, so the copies overlap compute) and brings it back
when the backward pass needs it: with checkpointing, that is the layers' inputs, the part of
activation memory that grows with depth and sequence length.
"""

from __future__ import annotations

from collections.abc import Iterable
from contextlib import AbstractContextManager, nullcontext

import torch
from torch import nn

from adaptlab.errors import ConfigError


def enable_checkpointing(model: nn.Module) -> None:
    """Checkpoint every transformer layer of `model` (a transformers model) in training."""
    if not getattr(model, "supports_gradient_checkpointing", False):
        raise ConfigError(
            f"{type(model).__name__} does not support activation checkpointing in transformers; "
            "drop --gradient-checkpointing"
        )
    model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})  # type: ignore[operator]
    config = getattr(model, "config", None)
    if config is not None and getattr(config, "use_cache", False):
        config.use_cache = False  # training keeps no key-value cache anyway


def offloaded_activations(
    device: torch.device, parameters: Iterable[torch.Tensor] = ()
) -> AbstractContextManager[object]:
    """A context in which what autograd saves for the backward pass waits in host memory
    (pinned when CUDA is there) and comes back to its device when the backward pass needs it.
    Tensors sharing storage with `parameters` stay where they are: the weights are there all
    along, and a host copy would only add a second one in the backward pass. On the CPU, where
    activations already are in host memory, it changes nothing."""
    if device.type == "cpu":
        return nullcontext()
    kept = {_storage(parameter) for parameter in parameters}
    pin = torch.cuda.is_available()

    def pack(tensor: torch.Tensor) -> tuple[torch.device | None, torch.Tensor]:
        if _storage(tensor) in kept:
            return None, tensor
        host = torch.empty(tensor.size(), dtype=tensor.dtype, layout=tensor.layout, pin_memory=pin)
        host.copy_(tensor)
        return tensor.device, host

    def unpack(packed: tuple[torch.device | None, torch.Tensor]) -> torch.Tensor:
        home, tensor = packed
        return tensor if home is None else tensor.to(home, non_blocking=pin)

    return torch.autograd.graph.saved_tensors_hooks(pack, unpack)


def _storage(tensor: torch.Tensor) -> int:
    """An identity of the storage under `tensor`, shared by its views (fake tensors too)."""
    return int(tensor.untyped_storage()._cdata)
