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
    checks.positive(batch_size, "batch size")
    order = (
        torch.randperm(len(features), generator=generator).tolist()
        if generator is not None
        else range(len(features))
    )
    order = list(order)
    for start in range(0, len(order), batch_size):
        batch = encoder.collate([features[i] for i in order[start : start + batch_size]])
        yield {k: v.to(device) for k, v in batch.items()}


def batch_count(size: int, batch_size: int) -> int:
    """Number of batches for `size` examples."""
    return -(-size // batch_size)
