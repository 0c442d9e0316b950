"""Batching of encoded features: seeded shuffles, dynamic padding, moves to the device."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import torch

from adaptlab import checks
from adaptlab.data import TextEncoder


def batches(
    encoder: TextEncoder,
    features: Sequence[dict[str, Any]],
    batch_size: int,
    device: torch.device,
    generator: torch.Generator | None = None,
) -> Iterator[dict[str, torch.Tensor]]:
    """Padded batches in order, or shuffled by `generator` when one is given."""
    for _, batch in indexed_batches(encoder, features, batch_size, device, generator):
        yield batch


def indexed_batches(
    encoder: TextEncoder,
    features: Sequence[dict[str, Any]],
    batch_size: int,
    device: torch.device,
    generator: torch.Generator | None = None,
) -> Iterator[tuple[list[int], dict[str, torch.Tensor]]]:
    """`batches`, each with the indices of its examples in `features`."""
    checks.positive(batch_size, "batch size")
    order = (
        torch.randperm(len(features), generator=generator).tolist()
        if generator is not None
        else list(range(len(features)))
    )
    for start in range(0, len(order), batch_size):
        indices = order[start : start + batch_size]
        batch = encoder.collate([features[i] for i in indices])
        yield indices, {k: v.to(device) for k, v in batch.items()}


def batch_count(size: int, batch_size: int) -> int:
    """Number of batches for `size` examples."""
    return -(-size // batch_size)
