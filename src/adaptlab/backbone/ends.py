"""What sits before and after a transformer's blocks: the module owning its input embeddings
and its task head (`adaptlab.backbone.discovery` finds the blocks between them)."""

from __future__ import annotations

from collections.abc import Sequence

from torch import nn

from adaptlab.backbone.parts import get_module
from adaptlab.errors import BackboneError

POOLER_NAMES = {"pooler"}
"""Children of a base model that belong to the head."""


def find_embeddings(
    model: nn.Module, base_name: str, model_class: str, blocks: Sequence[str]
) -> str:
    """The module that owns the input token embeddings: BERT's `embeddings` (with its position
    table and norm), else the table itself (Llama's; OPT's, whose parent holds the blocks)."""
    get_embeddings = getattr(model, "get_input_embeddings", None)
    try:
        table = get_embeddings() if callable(get_embeddings) else None
    except NotImplementedError:  # transformers' answer for a model without a token table
        table = None
    name = next((n for n, m in model.named_modules() if m is table), None)
    if name is None:
        raise BackboneError(
            f"{model_class}: get_input_embeddings() gives no module of the model; "
            "the model must expose its input embeddings"
        )
    parent = name.rsplit(".", 1)[0] if "." in name else ""
    if parent in ("", base_name) or any(b.startswith(f"{parent}.") for b in blocks):
        return name
    return parent


def find_head(model: nn.Module, base_name: str) -> tuple[str, ...]:
    """Task modules: the model's children outside the base model, and the base model's pooler.

    The pooler counts as head because it is task-specific (trained for next-sentence
    prediction, absent from many checkpoints) and feeds the classifier directly.
    """
    if not base_name:
        return ()
    outside = [
        name
        for name, child in model.named_children()
        if name != base_name and any(True for _ in child.parameters())
    ]
    base = get_module(model, base_name)
    poolers = [
        f"{base_name}.{name}"
        for name, child in base.named_children()
        if name in POOLER_NAMES and any(True for _ in child.parameters())
    ]
    return tuple(outside + poolers)
