"""Activation checkpointing and activation offloading: training memory traded for compute.

Checkpointing keeps only each transformer layer's input for the backward pass and runs the
layer's forward again when its gradient is needed (transformers' own per-layer checkpointing,
in PyTorch's non-reentrant form: it re-runs the adapter modules inserted inside the layer,
needs no input that requires grad, and restores the dropout RNG, so the gradients equal those
of training without it). The recompute runs outside the hooks around the layer, so it also
puts back the dropout rates the forward ran with: the hooks that run a frozen front or a
Mixout model without dropout (`adaptlab.methods.frozen.quiet`) are gone by then. A layer
that trains nothing and reads no input that needs a gradient (a frozen front) keeps nothing
for the backward pass and is never recomputed, as without checkpointing. Offloading moves every
tensor the backward pass keeps to host memory (pinned on a GPU, so the copies overlap compute)
and brings it back when the backward pass needs it: with checkpointing, that is the layers'
inputs, the part of activation memory that grows with depth and sequence length.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from functools import partial

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from adaptlab.errors import ConfigError
from adaptlab.methods.frozen import dropout_rates

_CHECKPOINT_FUNCTION = "_gradient_checkpointing_func"
"""What transformers calls to checkpoint a layer, set on each module it checkpoints."""


def enable_checkpointing(model: nn.Module) -> None:
    """Checkpoint every transformer layer of `model` (a transformers model) in training."""
    if not getattr(model, "supports_gradient_checkpointing", False):
        raise ConfigError(
            f"{type(model).__name__} does not support activation checkpointing in transformers; "
            "drop --gradient-checkpointing"
        )
    model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})  # type: ignore[operator]
    # transformers makes the embeddings' output require grad for reentrant checkpointing; the
    # non-reentrant form needs none, and without it a frozen front builds no graph at all
    model.disable_input_require_grads()  # type: ignore[operator]
    for module in model.modules():
        if hasattr(module, _CHECKPOINT_FUNCTION):
            replayed = partial(_forward_rates, module)
            setattr(
                module,
                _CHECKPOINT_FUNCTION,
                partial(checkpoint, use_reentrant=False, context_fn=replayed),
            )
    config = getattr(model, "config", None)
    if config is not None and getattr(config, "use_cache", False):
        config.use_cache = False  # training keeps no key-value cache anyway


def _forward_rates(
    module: nn.Module,
) -> tuple[AbstractContextManager[None], AbstractContextManager[None]]:
    """The contexts of one checkpointed forward of `module` and of its recompute: the recompute
    runs with every dropout rate inside `module` as the forward found it."""
    rates = [(m, name, getattr(m, name)) for m in module.modules() for name in dropout_rates(m)]
    return nullcontext(), _rates_set(rates)


@contextmanager
def _rates_set(rates: list[tuple[nn.Module, str, float]]) -> Iterator[None]:
    """Each module's dropout attribute at the given rate, put back afterwards."""
    before = [getattr(m, name) for m, name, _ in rates]
    for m, name, rate in rates:
        setattr(m, name, rate)
    try:
        yield
    finally:
        for (m, name, _), rate in zip(rates, before, strict=True):
            setattr(m, name, rate)


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
