"""The key-value cache of sequences that decode together: one row per request, left-padded.

Each request keeps its own keys and values (its row); sequences of different lengths share a
forward pass by padding on the left, masked out, with every row's positions counted from its
own first token, as `model.generate` does for a padded batch. The rows are taken apart and put
together again only when a request joins or leaves; a step between changes just grows them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

import torch
from torch import nn
from transformers import DynamicCache, PreTrainedConfig
from transformers.cache_utils import DynamicLayer


def new_cache(model: nn.Module) -> DynamicCache:
    """An empty cache of the layer kinds `model`'s config asks for."""
    return DynamicCache(config=cast(PreTrainedConfig, model.config))


def joinable(model: nn.Module) -> bool:
    """Whether rows of `model`'s cache can be padded and joined: every layer keeps all its
    keys (no sliding window or recurrent state, whose rows do not line up by position)."""
    return all(type(layer) is DynamicLayer for layer in new_cache(model).layers)


@dataclass
class KVRows:
    """A cache of `rows` sequences and which of its columns hold tokens (1) or padding (0)."""

    cache: DynamicCache
    mask: torch.Tensor
    """(rows, cached tokens), long."""

    @property
    def rows(self) -> int:
        return int(self.mask.shape[0])

    def lengths(self) -> torch.Tensor:
        """Tokens each row holds: the position of its next token, (rows, 1)."""
        return self.mask.sum(dim=1, keepdim=True)

    def grown(self) -> torch.Tensor:
        """The attention mask of a step that adds one token to every row."""
        return torch.cat([self.mask, self.mask.new_ones(self.rows, 1)], dim=1)

    def take(self, order: torch.Tensor) -> KVRows:
        """Rows `order` (indices, in that order), columns no row uses dropped."""
        mask = self.mask.index_select(0, order)
        used = mask.any(dim=0).nonzero()
        start = int(used[0]) if used.numel() else mask.shape[1]
        pairs = [
            (keys.index_select(0, order)[:, :, start:], values.index_select(0, order)[:, :, start:])
            for keys, values in _tensors(self.cache)
        ]
        return KVRows(DynamicCache(ddp_cache_data=pairs), mask[:, start:])


def join(parts: Sequence[KVRows]) -> KVRows:
    """The rows of every part, in order, padded on the left to the longest."""
    if len(parts) == 1:
        return parts[0]
    width = max(part.mask.shape[1] for part in parts)
    masks = [_left_pad(part.mask, width, dim=1) for part in parts]
    layers = zip(*(_tensors(part.cache) for part in parts), strict=True)
    pairs = [
        (
            torch.cat([_left_pad(keys, width, dim=2) for keys, _ in same]),
            torch.cat([_left_pad(values, width, dim=2) for _, values in same]),
        )
        for same in layers
    ]
    return KVRows(DynamicCache(ddp_cache_data=pairs), torch.cat(masks))


def _tensors(cache: DynamicCache) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Each layer's keys and values, (rows, heads, tokens, head width)."""
    layers = [cast(DynamicLayer, layer) for layer in cache.layers]
    return [(cast(torch.Tensor, layer.keys), cast(torch.Tensor, layer.values)) for layer in layers]


def _left_pad(x: torch.Tensor, width: int, dim: int) -> torch.Tensor:
    """`x` with zeros in front along `dim`, `width` long."""
    missing = width - x.shape[dim]
    if missing == 0:
        return x
    shape = list(x.shape)
    shape[dim] = missing
    return torch.cat([x.new_zeros(shape), x], dim=dim)
