"""Plain documents as causal-LM training examples: each document tokenised whole (with the
tokenizer's end-of-text token after it, so the model learns where text ends) and cut into
consecutive windows of at most `max_length` tokens, every token a target. A window of one token
has nothing to predict and is left out."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from transformers import PreTrainedTokenizerBase


@dataclass(frozen=True)
class Window:
    """A stretch of a document's tokens, each a target (`input_ids` and `labels` alike)."""

    input_ids: tuple[int, ...]

    @property
    def labels(self) -> tuple[int, ...]:
        return self.input_ids


def windows(
    documents: Sequence[str], tokenizer: PreTrainedTokenizerBase, max_length: int
) -> tuple[Window, ...]:
    """`documents` tokenised and cut into windows of at most `max_length` tokens."""
    end = tokenizer.eos_token_id
    cut: list[Window] = []
    for ids in tokenizer(list(documents), add_special_tokens=True)["input_ids"]:
        if end is not None and (not ids or ids[-1] != end):
            ids = [*ids, end]
        for start in range(0, len(ids), max_length):
            piece = tuple(ids[start : start + max_length])
            if len(piece) >= 2:
                cut.append(Window(piece))
    return tuple(cut)
