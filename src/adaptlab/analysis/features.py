"""Hidden states of every layer at sampled tokens, captured by forward hooks.

Layer 0 is the embeddings' output, layer i the output of transformer block i, found by
`find_backbone` (so any architecture it knows works, and no forward is re-implemented). Examples
are batched by a `Collator` (`adaptlab.engine.trained_run`): a labelled run's `TextEncoder`
pads its feature dicts, a decoder's examples are right-padded one a row (`DecoderCollator`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from adaptlab.analysis.tokens import TokenSample, token_ids
from adaptlab.backbone.discovery import find_backbone
from adaptlab.backbone.parts import get_module
from adaptlab.data.encoding import TextEncoder
from adaptlab.engine.trained_run import Collator, EncoderCollator
from adaptlab.errors import ConfigError
from adaptlab.methods.adapt import get_handle
from adaptlab.progress import track


def layer_names(model: nn.Module) -> list[str]:
    """Module names whose outputs are the layers: the embeddings, then every block."""
    try:  # an adapted model's layout was found before modules were inserted
        parts = get_handle(model).backbone
    except ConfigError:
        parts = find_backbone(model)
    return [parts.embeddings, *(block.name for block in parts.blocks)]


@torch.no_grad()
def layer_features(
    model: nn.Module,
    encoder: TextEncoder | Collator,
    features: Sequence[Any],
    sample: TokenSample,
    *,
    batch_size: int = 32,
    progress: bool = False,
    desc: str = "features",
) -> list[torch.Tensor]:
    """Per layer, an (N, hidden) float32 CPU tensor of the sampled tokens, in sample order;
    `encoder` batches `features` (a `TextEncoder` its feature dicts, or a `Collator`)."""
    collator = as_collator(encoder)
    left = collator.padding_side == "left"
    names = layer_names(model)
    captured: list[torch.Tensor | None] = [None] * len(names)

    def keep(index: int) -> Any:
        def hook(_module: nn.Module, _inputs: Any, output: Any) -> None:
            captured[index] = output[0] if isinstance(output, tuple | list) else output

        return hook

    hooks = [get_module(model, n).register_forward_hook(keep(i)) for i, n in enumerate(names)]
    device = next(model.parameters()).device
    grouped = sample.by_example()
    examples = sorted(grouped)
    rows: list[list[torch.Tensor]] = [[] for _ in names]
    was_training = model.training
    model.eval()
    try:
        starts = range(0, len(examples), batch_size)
        for start in track(starts, desc, "batch", enabled=progress):
            chunk = examples[start : start + batch_size]
            batch = collator.collate([features[e] for e in chunk])
            model(**{k: v.to(device) for k, v in batch.items()})
            width = batch["input_ids"].shape[1]
            rows_in_batch, columns = _padded_positions(chunk, grouped, features, width, left)
            for layer, states in enumerate(captured):
                assert states is not None, f"layer {names[layer]} produced no output"
                rows[layer].append(states[rows_in_batch, columns].float().cpu())
    finally:
        for hook in hooks:
            hook.remove()
        model.train(was_training)
    return [torch.cat(parts) for parts in rows]


def as_collator(encoder: TextEncoder | Collator) -> Collator:
    """What batches the examples: a `TextEncoder`'s feature dicts as it pads them."""
    return EncoderCollator(encoder) if isinstance(encoder, TextEncoder) else encoder


def _padded_positions(
    chunk: Sequence[int],
    grouped: dict[int, list[int]],
    features: Sequence[Any],
    width: int,
    left: bool,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Batch row and padded column of each sampled token (left padding shifts the columns)."""
    rows, columns = [], []
    for row, example in enumerate(chunk):
        offset = width - len(token_ids(features[example])) if left else 0
        for position in grouped[example]:
            rows.append(row)
            columns.append(position + offset)
    return torch.tensor(rows), torch.tensor(columns)
