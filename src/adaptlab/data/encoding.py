"""Tokenize examples for a task and collate them into dynamically padded tensors."""

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch

from adaptlab.data.label_kind import LabelKind
from adaptlab.data.types import Example
from adaptlab.errors import ConfigError, DataError

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

UNSET_LENGTH = 10**9
"""Tokenizers that do not know their model's length report a huge model_max_length."""

IGNORE_INDEX = -100
"""Label value the loss ignores: extra word pieces, special tokens and padding."""
INPUT_KEYS = ("input_ids", "attention_mask", "token_type_ids")


def checked_length(tokenizer: "PreTrainedTokenizerBase", max_length: int) -> int:
    """`max_length` if at least 2 and within what the tokenizer says its model takes."""
    if isinstance(max_length, bool) or not isinstance(max_length, int) or max_length < 2:
        raise ConfigError(f"max_length must be at least 2 tokens, got {max_length!r}")
    limit = getattr(tokenizer, "model_max_length", None)
    if isinstance(limit, int) and limit < UNSET_LENGTH and max_length > limit:
        raise ConfigError(
            f"max_length {max_length} is more than the {limit} tokens this model takes "
            f"(its tokenizer's model_max_length); pick at most {limit}"
        )
    return max_length


def padded(values: list[int], length: int, fill: int, left: bool) -> list[int]:
    """Pad a list to `length` on the tokenizer's padding side."""
    padding = [fill] * (length - len(values))
    return padding + values if left else values + padding


class TextEncoder:
    """Turns examples of a labelled task into token features and batches them, padding each
    batch to its longest. The task it is given (a `LabelKind`: an `adaptlab.tasks` task) makes
    each label a target (a class id, a multi-hot row of `label_count`, a number) and a batch's
    targets a tensor; a word-level task's words are labelled on each word's first piece only."""

    def __init__(
        self,
        tokenizer: "PreTrainedTokenizerBase",
        task: LabelKind,
        label_count: int,
        max_length: int = 128,
    ) -> None:
        if task.named_labels and label_count < 1:
            raise ConfigError(f"label_count must be at least 1 for a {task.name} task")
        checked_length(tokenizer, max_length)
        if task.word_level and not getattr(tokenizer, "is_fast", False):
            raise ConfigError(
                f"{task.name} tasks need a fast tokenizer (for word_ids); "
                f"{type(tokenizer).__name__} is not one; load it with "
                "AutoTokenizer.from_pretrained(..., use_fast=True)"
            )
        if tokenizer.pad_token_id is None:
            raise ConfigError(
                f"tokenizer {type(tokenizer).__name__} has no padding token; set "
                "tokenizer.pad_token (for example to tokenizer.eos_token) before encoding"
            )
        self.tokenizer = tokenizer
        self.task = task.name
        self.kind = task
        self.label_count = label_count
        self.max_length = max_length

    def _label(self, label: int | tuple[int, ...] | float) -> int | float | list[float]:
        """The training target of one sentence-level example."""
        return self.kind.target(label, self.label_count)

    def _encode_sentences(self, examples: Sequence[Example]) -> list[dict[str, Any]]:
        """Tokenize texts (and text pairs) with truncation; attach labels."""
        texts = [example.text for example in examples]
        pairs = [example.text_pair for example in examples]
        if not all(isinstance(text, str) for text in texts):
            raise DataError(
                f"a {self.task} example has a word list as text; use a word-level task (token)"
            )
        if None in pairs and any(pair is not None for pair in pairs):
            raise DataError("some examples have a text pair and some not; give all or none one")
        encoded = self.tokenizer(
            texts,
            None if None in pairs else pairs,
            truncation=True,
            max_length=self.max_length,
        )
        keys = [key for key in INPUT_KEYS if key in encoded]
        return [
            {**{key: encoded[key][row] for key in keys}, "labels": self._label(example.label)}
            for row, example in enumerate(examples)
        ]

    def _encode_words(self, examples: Sequence[Example]) -> list[dict[str, Any]]:
        """Tokenize word lists; label the first piece of each word, -100 elsewhere."""
        tag_lists: list[tuple[int, ...]] = []
        for example in examples:
            words, tags = example.text, example.label
            if isinstance(words, str) or not isinstance(tags, tuple) or len(words) != len(tags):
                raise DataError("token examples need a word list as text and one tag id per word")
            if example.text_pair is not None:
                raise DataError("token examples cannot have a text pair; drop text_pair_column")
            tag_lists.append(tags)
        encoded = self.tokenizer(
            [list(example.text) for example in examples],
            is_split_into_words=True,
            truncation=True,
            max_length=self.max_length,
        )
        keys = [key for key in INPUT_KEYS if key in encoded]
        features = []
        for row, tags in enumerate(tag_lists):
            labels, previous = [], None
            for word in encoded.word_ids(row):
                first_piece = word is not None and word != previous
                labels.append(
                    self.kind.target(tags[word], self.label_count) if first_piece else IGNORE_INDEX
                )
                previous = word
            features.append({**{key: encoded[key][row] for key in keys}, "labels": labels})
        return features

    def encode(self, examples: Sequence[Example]) -> list[dict[str, Any]]:
        """Token features (lists of ints) and `labels` per example, truncated to max_length."""
        if not examples:
            return []
        if self.kind.word_level:
            return self._encode_words(examples)
        return self._encode_sentences(examples)

    def collate(self, features: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        """Stack features into tensors padded to the batch's longest sequence."""
        if not features:
            raise DataError("cannot collate an empty batch; give at least one feature")
        longest = max(len(feature["input_ids"]) for feature in features)
        left = self.tokenizer.padding_side == "left"
        fills = {
            "input_ids": self.tokenizer.pad_token_id,
            "attention_mask": 0,
            "token_type_ids": getattr(self.tokenizer, "pad_token_type_id", 0),
        }
        batch = {
            key: torch.tensor([padded(f[key], longest, fill, left) for f in features])
            for key, fill in fills.items()
            if key in features[0]
        }
        if "labels" in features[0]:
            labels = [feature["labels"] for feature in features]
            batch["labels"] = self.kind.label_tensor(labels, longest, left)
        return batch
