"""Batching of encoded features: dynamic padding, moves to the device."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import torch

import adaptlab.checks as checks
from adaptlab.data.encoding import TextEncoder


def batches(
    encoder: TextEncoder,
    features: Sequence[dict[str, Any]],
    batch_size: int,
    device: torch.device,
) -> Iterator[dict[str, torch.Tensor]]:
    """Padded batches of `features` in order."""
    checks.positive(batch_size, "batch size")
    for start in range(0, len(features), batch_size):
        yield collated(
            encoder, features, range(start, min(start + batch_size, len(features))), device
        )


def collated(
    encoder: TextEncoder,
    features: Sequence[dict[str, Any]],
    indices: Sequence[int],
    device: torch.device,
) -> dict[str, torch.Tensor]:
    """The examples `indices` of `features` as one padded batch on `device`."""
    batch = encoder.collate([features[i] for i in indices])
    return {k: v.to(device) for k, v in batch.items()}


def batch_count(size: int, batch_size: int) -> int:
    """Number of batches for `size` examples."""
    return -(-size // batch_size)
