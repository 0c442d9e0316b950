"""Seeded samples of token positions for representation analysis (paper-effectiveness §2.2).

A token qualifies when its attention mask is 1 and it is not a special token (padding,
[CLS], [SEP], ...), as in §2.2, footnote 2. Positions count over an example's unpadded
features, so the same sample is valid whatever padding side a batch uses.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

import torch

import adaptlab.checks as checks
from adaptlab.errors import ConfigError, DataError

DEFAULT_TOKENS = 5000
"""N of §2.2: 5,000 tokens sampled from the dev set."""


@dataclass(frozen=True)
class TokenSample:
    """Sampled tokens as (example, position) pairs, sorted by example then position."""

    examples: tuple[int, ...]
    positions: tuple[int, ...]
    token_ids: tuple[int, ...]

    def __len__(self) -> int:
        return len(self.examples)

    def by_example(self) -> dict[int, list[int]]:
        """Example index -> the sampled positions inside it, in order."""
        grouped: dict[int, list[int]] = {}
        for example, position in zip(self.examples, self.positions, strict=True):
            grouped.setdefault(example, []).append(position)
        return grouped


def eligible_tokens(
    features: Sequence[dict[str, Any]], special_ids: Collection[int]
) -> list[tuple[int, int, int]]:
    """(example, position, token id) of every unmasked, non-special token."""
    special = set(special_ids)
    found = []
    for example, feature in enumerate(features):
        ids = feature["input_ids"]
        mask = feature.get("attention_mask") or [1] * len(ids)
        for position, (token, keep) in enumerate(zip(ids, mask, strict=True)):
            if keep and token not in special:
                found.append((example, position, int(token)))
    return found


def sample_tokens(
    features: Sequence[dict[str, Any]],
    special_ids: Collection[int],
    count: int = DEFAULT_TOKENS,
    seed: int = 0,
) -> TokenSample:
    """`count` distinct tokens drawn uniformly (seeded) from the eligible tokens of `features`."""
    if count < 2:
        raise ConfigError(f"--tokens must be at least 2 (a similarity needs pairs), got {count}")
    checks.seed(seed, "--seed")
    pool = eligible_tokens(features, special_ids)
    if len(pool) < count:
        raise DataError(
            f"only {len(pool)} non-special tokens in {len(features)} examples, {count} asked; "
            f"pass --tokens {len(pool)} or fewer, or more data"
        )
    generator = torch.Generator().manual_seed(seed)
    picked = sorted(torch.randperm(len(pool), generator=generator)[:count].tolist())
    chosen = [pool[i] for i in picked]
    return TokenSample(
        examples=tuple(c[0] for c in chosen),
        positions=tuple(c[1] for c in chosen),
        token_ids=tuple(c[2] for c in chosen),
    )
