"""Forward pre-hooks on the FFN output projections: read, replace or scale neuron activations.

The input of block l's FFN output projection is its intermediate activation, one value per
neuron, so every hook here is a pre-hook on `lm.ffn_out[l]` and no model forward is rewritten.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from typing import Any

import torch
from torch import nn
from torch.utils.hooks import RemovableHandle

from adaptlab.errors import ConfigError
from adaptlab.knowledge.lm import KnowledgeLM

Neuron = tuple[int, int]
"""(layer, index) of one FFN intermediate neuron."""

PreHook = Callable[[nn.Module, tuple[Any, ...]], tuple[Any, ...] | None]


@contextmanager
def pre_hook(module: nn.Module, hook: PreHook) -> Iterator[RemovableHandle]:
    """`hook` as a forward pre-hook of `module` for the duration of the block."""
    handle = module.register_forward_pre_hook(hook)
    try:
        yield handle
    finally:
        handle.remove()


@contextmanager
def captured_activations(lm: KnowledgeLM, position: int) -> Iterator[list[torch.Tensor]]:
    """Fills the yielded list, per layer, with the activations (batch, neurons) at `position`."""
    captured: list[torch.Tensor] = []

    def capture(_: nn.Module, args: tuple[Any, ...]) -> None:
        captured.append(args[0][:, position].detach())

    with ExitStack() as stack:
        for module in lm.ffn_out:
            stack.enter_context(pre_hook(module, capture))
        yield captured


@contextmanager
def replaced_activations(
    module: nn.Module, position: int, rows: slice, values: torch.Tensor
) -> Iterator[None]:
    """Replace the activations of batch `rows` at `position` by `values` (rows, neurons)."""

    def replace(_: nn.Module, args: tuple[Any, ...]) -> tuple[Any, ...]:
        x = args[0].clone()
        x[rows, position] = values
        return (x, *args[1:])

    with pre_hook(module, replace):
        yield


@contextmanager
def scaled_neurons(lm: KnowledgeLM, neurons: Sequence[Neuron], factor: float) -> Iterator[None]:
    """Multiply the chosen neurons' activations by `factor` at every position (0 suppresses)."""
    by_layer: dict[int, list[int]] = {}
    for layer, index in neurons:
        by_layer.setdefault(layer, []).append(index)

    def scaler(indices: list[int]) -> PreHook:
        chosen = torch.tensor(indices)

        def scale(_: nn.Module, args: tuple[Any, ...]) -> tuple[Any, ...]:
            x = args[0].clone()
            x[..., chosen] = x[..., chosen] * factor
            return (x, *args[1:])

        return scale

    with ExitStack() as stack:
        for layer, indices in by_layer.items():
            stack.enter_context(pre_hook(lm.ffn_out[layer], scaler(indices)))
        yield


@contextmanager
def frozen_parameters(model: nn.Module) -> Iterator[None]:
    """No parameter records gradients, so autograd tracks only the activations we scale."""
    trainable = [p for p in model.parameters() if p.requires_grad]
    for parameter in trainable:
        parameter.requires_grad_(False)
    try:
        yield
    finally:
        for parameter in trainable:
            parameter.requires_grad_(True)


def lm_head(lm: KnowledgeLM) -> nn.Linear:
    """The output projection to the vocabulary; models without a linear one are an error."""
    head = lm.model.get_output_embeddings()
    if not isinstance(head, nn.Linear):
        raise ConfigError(f"{type(lm.model).__name__}: no linear LM head (get_output_embeddings)")
    return head


def _model_inputs(input_ids: torch.Tensor, kind: str, past: Any) -> dict[str, Any]:
    kwargs: dict[str, Any] = {"input_ids": input_ids}
    if past is not None:
        length = past.get_seq_length() + input_ids.shape[1]
        kwargs.update(past_key_values=past, use_cache=True)
        kwargs["attention_mask"] = torch.ones(input_ids.shape[0], length, dtype=torch.long)
    else:
        kwargs["attention_mask"] = torch.ones_like(input_ids)
        if kind == "causal":
            kwargs["use_cache"] = False
    return kwargs


def head_input(
    lm: KnowledgeLM, input_ids: torch.Tensor, position: int, past: Any = None
) -> torch.Tensor:
    """The LM head's input (batch, hidden) at `position`, as autograd sees it.

    The model's own head is handed no position at all, so the forward computes no
    vocabulary-sized logits; callers apply `lm_head` where they need logits.
    """
    seen: list[torch.Tensor] = []

    def no_position(_: nn.Module, args: tuple[Any, ...]) -> tuple[Any, ...]:
        seen.append(args[0][:, position])
        return (args[0][:, :0], *args[1:])

    with pre_hook(lm_head(lm), no_position):
        lm.model(**_model_inputs(input_ids, lm.kind, past))
    return seen[0]


def answer_logits(
    lm: KnowledgeLM, input_ids: torch.Tensor, position: int, past: Any = None
) -> torch.Tensor:
    """The logits (batch, vocabulary) at `position`, computed there only (no gradient)."""
    with torch.no_grad():
        return lm_head(lm)(head_input(lm, input_ids, position, past))
