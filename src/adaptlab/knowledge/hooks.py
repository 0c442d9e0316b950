"""Forward pre-hooks that read, scale or replace neuron activations; no model forward is rewritten.

The input of block l's FFN output projection is its intermediate activation, one value per
neuron, so those hooks are pre-hooks on `lm.ffn_out[l]`. Attribution also grows its batch at
chosen blocks (a pre-hook on `lm.blocks[l]`) and hides the answer-free positions from the head.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
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
def appended_rows(block: nn.Module, count: int) -> Iterator[None]:
    """`block` receives its hidden states with `count` copies of batch row 0 appended.

    Masks and position embeddings that the model built for a one-row input broadcast over the
    new rows, so attribution starts every batch from one row. The copies are detached: no
    gradient flows from them into row 0 below the block.
    """

    def grow(hidden: torch.Tensor) -> torch.Tensor:
        return torch.cat([hidden, hidden[:1].detach().expand(count, *hidden.shape[1:])])

    def append(
        _: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> tuple[tuple[Any, ...], dict[str, Any]]:
        if args:
            return (grow(args[0]), *args[1:]), kwargs
        if "hidden_states" not in kwargs:
            raise ConfigError(f"{type(block).__name__}: no hidden states among the block's inputs")
        return args, {**kwargs, "hidden_states": grow(kwargs["hidden_states"])}

    handle = block.register_forward_pre_hook(append, with_kwargs=True)
    try:
        yield
    finally:
        handle.remove()


@dataclass
class ScaledRows:
    """What `scaled_activations` found and put in place during the forward pass."""

    activation: torch.Tensor | None = None  # (neurons,) row 0's activation
    scaled: torch.Tensor | None = None  # (rows, neurons) alpha_k * activation, records gradients

    def tensors(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(activation, scaled); an error if the forward pass never reached the module."""
        if self.activation is None or self.scaled is None:
            raise ConfigError("the forward pass never reached the FFN output projection")
        return self.activation, self.scaled


@contextmanager
def scaled_activations(
    module: nn.Module, position: int, rows: list[int], alphas: torch.Tensor
) -> Iterator[ScaledRows]:
    """Batch row rows[k] gets alphas[k] times row 0's activation at `position`.

    Row 0 is the batch's unmodified row. The scaled values are a new leaf tensor that records
    gradients, so autograd differentiates with respect to it. When rows[0] is row 0 itself
    (alphas[0] = 1), row 0 keeps its value and its dependence on the layers below (the leaf
    is added as a zero), so its gradient there is the unmodified model's, through every path.
    """
    found = ScaledRows()
    index = torch.tensor(rows, device=alphas.device)

    def scale(_: nn.Module, args: tuple[Any, ...]) -> tuple[Any, ...]:
        activation = args[0][0, position].detach()
        found.activation = activation
        found.scaled = (alphas[:, None] * activation).requires_grad_(True)
        values = found.scaled
        if rows[0] == 0:
            row = args[0][:1, position] + values[:1] - values[:1].detach()
            values = torch.cat([row, values[1:]])
        x = args[0].clone()
        x[index, position] = values
        return (x, *args[1:])

    with pre_hook(module, scale):
        yield found


@contextmanager
def scaled_neurons(lm: KnowledgeLM, neurons: Sequence[Neuron], factor: float) -> Iterator[None]:
    """Multiply the chosen neurons' activations by `factor` at every position (0 suppresses)."""
    by_layer: dict[int, list[int]] = {}
    for layer, index in neurons:
        by_layer.setdefault(layer, []).append(index)

    def scaler(layer: int, indices: list[int]) -> PreHook:
        chosen = torch.tensor(indices, device=lm.value_slots(layer).device)

        def scale(_: nn.Module, args: tuple[Any, ...]) -> tuple[Any, ...]:
            x = args[0].clone()
            x[..., chosen] = x[..., chosen] * factor
            return (x, *args[1:])

        return scale

    with ExitStack() as stack:
        for layer, indices in by_layer.items():
            stack.enter_context(pre_hook(lm.ffn_out[layer], scaler(layer, indices)))
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
        kwargs["attention_mask"] = torch.ones(
            input_ids.shape[0], length, dtype=torch.long, device=input_ids.device
        )
    else:
        kwargs["attention_mask"] = torch.ones_like(input_ids)
        if kind == "causal":
            kwargs["use_cache"] = False
    return kwargs


@contextmanager
def without_logits(lm: KnowledgeLM) -> Iterator[list[torch.Tensor]]:
    """The LM head is handed no position, so a forward pass computes no vocabulary-sized logits.

    The list receives each input the head was given (batch, positions, hidden).
    """
    seen: list[torch.Tensor] = []

    def no_position(_: nn.Module, args: tuple[Any, ...]) -> tuple[Any, ...]:
        seen.append(args[0])
        return (args[0][:, :0], *args[1:])

    with pre_hook(lm_head(lm), no_position):
        yield seen


def head_input(
    lm: KnowledgeLM, input_ids: torch.Tensor, position: int, past: Any = None
) -> torch.Tensor:
    """The LM head's input (batch, hidden) at `position`, as autograd sees it.

    The forward computes no logits; callers apply `lm_head` where they need them.
    """
    with without_logits(lm) as seen:
        lm.model(**_model_inputs(input_ids, lm.kind, past))
    return seen[0][:, position]
