"""Seeded samples of token positions for representation analysis (paper-effectiveness §2.2).

A token is never a special token (padding, [CLS], [SEP], BOS, EOS, ...), as in §2.2,
footnote 2. Which others qualify depends on what the example is:

- an encoder's feature (a dict of `input_ids` and `attention_mask`): every token whose
  attention mask is 1, as in §2.2;
- a decoder's example (`input_ids` and `labels`, IGNORE_INDEX off-target: prompt -> completion
  pairs, chats, plain-text windows): the tokens the run's loss reads, each target token and
  the token before it, whose hidden state predicts it. For a pair that is the prompt's last
  token and the answer's tokens (its closing EOS left out as special); for a chat, each
  assistant turn and the token before it; for plain text, where every token is a target,
  every token. The prompt's other tokens are context the run never learned to predict: an
  encoder's §2.2 sample reads every token of the input, a decoder's reads what it was adapted
  to produce.

Positions count over an example's unpadded tokens, so the same sample is valid whatever
padding side a batch uses.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

import adaptlab.checks as checks
from adaptlab.data.encoding import IGNORE_INDEX
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
    features: Sequence[Any], special_ids: Collection[int]
) -> list[tuple[int, int, int]]:
    """(example, position, token id) of every token that qualifies (see the module docstring)
    in `features`: an encoder's feature dicts or a decoder's examples."""
    special = set(special_ids)
    found = []
    for example, feature in enumerate(features):
        ids = token_ids(feature)
        for position, (token, keep) in enumerate(zip(ids, _kept(feature), strict=True)):
            if keep and token not in special:
                found.append((example, position, int(token)))
    return found


def token_ids(feature: Any) -> Sequence[int]:
    """An example's token ids, unpadded: an encoder's feature dict's or a decoder's example's."""
    return feature["input_ids"] if isinstance(feature, Mapping) else feature.input_ids


def _kept(feature: Any) -> list[bool]:
    """Per position, whether it may be sampled before special tokens are left out: unmasked
    (an encoder's), or a target or the token predicting one (a decoder's)."""
    if isinstance(feature, Mapping):
        mask = feature.get("attention_mask") or [1] * len(feature["input_ids"])
        return [bool(keep) for keep in mask]
    targets = [label != IGNORE_INDEX for label in feature.labels]
    return [here or after for here, after in zip(targets, [*targets[1:], False], strict=True)]


def sample_tokens(
    features: Sequence[Any],
    special_ids: Collection[int],
    count: int = DEFAULT_TOKENS,
    seed: int = 0,
) -> TokenSample:
    """`count` distinct tokens drawn uniformly (seeded) from the eligible tokens of `features`
    (`eligible_tokens`: an encoder's feature dicts or a decoder's examples)."""
    if count < 2:
        raise ConfigError(f"--tokens must be at least 2 (a similarity needs pairs), got {count}")
    checks.seed(seed, "--seed")
    pool = eligible_tokens(features, special_ids)
    if len(pool) < count:
        decoder = bool(features) and not isinstance(features[0], Mapping)
        which = (
            "target tokens or tokens before one (none special)" if decoder else "non-special tokens"
        )
        raise DataError(
            f"only {len(pool)} {which} in {len(features)} examples, {count} asked; "
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
