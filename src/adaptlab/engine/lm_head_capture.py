"""The hidden states a language model's output embeddings read, without the logits: a forward
pre-hook on `model.get_output_embeddings()` records what the head was about to multiply and
hands it no positions instead, so any transformers causal or masked LM works without
re-implementing its forward. A masked-LM head (BERT's `cls.predictions`: a transform, then
the decoder) is covered, since the decoder's input, after the transform, is what is recorded.

The chunked losses (`adaptlab.engine.lm_loss`) need the logits to be exactly `hidden @ weight.T
+ bias`; models whose forward changes the logits after the head (Gemma 2's soft-capping,
Cohere's scale, Granite's divisor) are refused by their config attribute.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from adaptlab.errors import ConfigError

LOGIT_CHANGES: dict[str, float | None] = {
    "final_logit_softcapping": None,  # Gemma 2/3, Mistral Large 4, VaultGemma, T5Gemma...
    "logits_soft_cap": None,  # RecurrentGemma
    "logit_scale": 1.0,  # Cohere
    "logits_scaling": 1.0,  # Granite (divides), HyperCLOVA X (multiplies)
    "lm_head_multiplier": 1.0,  # Falcon-H1
    "output_multiplier": 1.0,  # MuseSpark
}
"""Config attributes of transformers models whose forward changes the logits after the output
embeddings, and the value at which it does not (any other value is refused). MiniCPM3's
`logits_scaling` divides the hidden states before the head, which would be safe, but is
refused all the same: one rule by attribute name."""


@dataclass(frozen=True)
class LmHeadInput:
    """What a model's output embeddings were about to read: `hidden` (..., hidden size), and
    the head's `weight` (vocabulary, hidden size) and `bias`; logits = hidden @ weight.T + bias."""

    hidden: torch.Tensor
    weight: torch.Tensor
    bias: torch.Tensor | None


def output_embeddings(model: nn.Module) -> nn.Linear:
    """`model`'s output embeddings, a plain linear layer whose output the model returns as its
    logits unchanged; one line naming the model otherwise."""
    name = type(model).__name__
    check_plain_logits(model)
    getter = getattr(model, "get_output_embeddings", None)
    head = getter() if callable(getter) else None
    if head is None:
        raise ConfigError(f"{name} has no output embeddings (no LM head) to compute an LM loss")
    if not isinstance(head, nn.Linear) or not head.weight.is_floating_point():
        raise ConfigError(
            f"{name}: its output embeddings are a {type(head).__name__}, not a floating-point "
            "linear layer; the chunked LM loss cannot read them"
        )
    return head


def check_plain_logits(model: nn.Module) -> None:
    """Refuse, naming the model class and the config attribute, a model whose forward changes
    its logits after the output embeddings."""
    config = getattr(model, "config", None)
    if config is None:
        return
    configs = [config]
    if callable(getattr(config, "get_text_config", None)):
        configs.append(config.get_text_config())
    for part in configs:
        for attribute, neutral in LOGIT_CHANGES.items():
            value = getattr(part, attribute, None)
            if value is not None and value != neutral:
                raise ConfigError(
                    f"{type(model).__name__}: config.{attribute} = {value} changes the logits "
                    "after the output embeddings; the chunked LM loss does not support it"
                )


def lm_head_input(model: nn.Module, **inputs: Any) -> LmHeadInput:
    """Run `model(**inputs)` and return what its output embeddings read, and their weight and
    bias as the head's other pre-hooks leave them (an adapter replacing the weight).

    The head itself is handed no positions (its input cut to length 0 along the positions), so
    it makes no logits while the forward still runs to its end: every hook that waits for the
    forward to finish (adaptlab's, FSDP's) runs as usual, which stopping it with an exception
    would skip. What the forward returns is dropped."""
    head = output_embeddings(model)
    captured: list[LmHeadInput] = []

    def record(
        module: nn.Linear, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> tuple[tuple[Any, ...], dict[str, Any]]:
        hidden = args[0] if args else kwargs.pop("input")
        captured.append(LmHeadInput(hidden, module.weight, module.bias))
        return (hidden.narrow(-2, 0, 0), *args[1:]), kwargs

    handle = head.register_forward_pre_hook(record, with_kwargs=True)
    try:
        model(**inputs)
    finally:
        handle.remove()
    if len(captured) != 1:
        raise ConfigError(
            f"{type(model).__name__}: its forward ran its output embeddings {len(captured)} "
            "times, not once; the chunked LM loss needs one call"
        )
    return captured[0]
