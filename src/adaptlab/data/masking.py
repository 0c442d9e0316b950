"""Token features for masked-language modelling and BERT's masking of them.

Devlin et al. 2019 (BERT), §3.1 "Task #1: Masked LM" and Appendix A.1: 15% of the input
tokens are chosen for prediction; a chosen token becomes the mask token 80% of the time, a
random token 10% of the time, and stays as it is 10% of the time. Special tokens (<s>, </s>,
padding) are never chosen.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch

from adaptlab.data.encoding import IGNORE_INDEX
from adaptlab.errors import ConfigError

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

MASK_SHARE = 0.15
"""Share of tokens chosen for prediction (BERT §3.1)."""
MASK_TOKEN_SHARE, RANDOM_TOKEN_SHARE = 0.8, 0.1
"""Of the chosen: replaced by the mask token, by a random token; the rest are kept."""


class MaskedLmEncoder:
    """Tokenises documents (truncated to `max_length`) and builds masked batches from them."""

    def __init__(
        self,
        tokenizer: PreTrainedTokenizerBase,
        max_length: int = 128,
        mask_share: float = MASK_SHARE,
    ) -> None:
        if tokenizer.mask_token_id is None:
            raise ConfigError(
                f"tokenizer {type(tokenizer).__name__} has no mask token; masked-language "
                "modelling needs a model with one (BERT, RoBERTa, XLM-R, e5, ...)"
            )
        if tokenizer.pad_token_id is None:
            raise ConfigError(f"tokenizer {type(tokenizer).__name__} has no padding token")
        if max_length < 3:
            raise ConfigError(f"max_length must be at least 3 tokens, got {max_length}")
        if not 0 < mask_share < 1:
            raise ConfigError(f"the masked share must be in (0, 1), got {mask_share}")
        self.tokenizer = tokenizer
        self.max_length = max_length
        self.mask_share = mask_share
        specials = set(tokenizer.all_special_ids)
        self.replacements = torch.tensor(
            [i for i in range(len(tokenizer)) if i not in specials], dtype=torch.long
        )

    def encode(self, documents: Sequence[str]) -> list[dict[str, Any]]:
        """Token ids and the special-token mask of each document."""
        encoded = self.tokenizer(
            list(documents),
            truncation=True,
            max_length=self.max_length,
            return_special_tokens_mask=True,
        )
        keys = [k for k in ("input_ids", "token_type_ids", "special_tokens_mask") if k in encoded]
        return [{k: encoded[k][i] for k in keys} for i in range(len(documents))]

    def collate(
        self, features: Sequence[dict[str, Any]], generator: torch.Generator
    ) -> dict[str, torch.Tensor]:
        """A padded batch with BERT's masking drawn from `generator`; `labels` holds the
        original ids at the chosen positions and IGNORE_INDEX elsewhere."""
        length = max(len(f["input_ids"]) for f in features)
        pad = self.tokenizer.pad_token_id
        assert pad is not None

        def padded(key: str, fill: int) -> torch.Tensor:
            rows = [list(f[key]) + [fill] * (length - len(f[key])) for f in features]
            return torch.tensor(rows, dtype=torch.long)

        ids = padded("input_ids", pad)
        batch = {"attention_mask": padded("input_ids", -1).ne(-1).long()}
        if "token_type_ids" in features[0]:
            batch["token_type_ids"] = padded("token_type_ids", 0)
        eligible = padded("special_tokens_mask", 1).eq(0)
        chosen = (torch.rand(ids.shape, generator=generator) < self.mask_share) & eligible
        if not chosen.any() and eligible.any():  # a tiny batch: predict at least one token
            places = eligible.flatten().nonzero().flatten()
            pick = places[torch.randint(len(places), (1,), generator=generator)]
            chosen.view(-1)[pick] = True
        labels = ids.masked_fill(~chosen, IGNORE_INDEX)
        draw = torch.rand(ids.shape, generator=generator)
        to_mask = chosen & (draw < MASK_TOKEN_SHARE)
        to_random = (
            chosen & (draw >= MASK_TOKEN_SHARE) & (draw < MASK_TOKEN_SHARE + RANDOM_TOKEN_SHARE)
        )
        mask_id = self.tokenizer.mask_token_id
        assert mask_id is not None
        ids = ids.masked_fill(to_mask, mask_id)
        picks = torch.randint(len(self.replacements), ids.shape, generator=generator)
        ids = torch.where(to_random, self.replacements[picks], ids)
        return {"input_ids": ids, **batch, "labels": labels}
