"""The stages of a causal-LM sequence (lifelong pretraining): each a corpus of documents,
sampled to the sequence's sizes and tokenised for the model, and the stage in training."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from adaptlab.data.encoding import IGNORE_INDEX
from adaptlab.data.texts import TextCorpus, load_texts, sample_texts
from adaptlab.errors import DataError
from adaptlab.train.continual.spec import SequenceSpec

if TYPE_CHECKING:  # kd-logit's teacher cache collates documents without loading transformers
    from transformers import PreTrainedTokenizerBase

Document = tuple[int, ...]
"""A document's token ids, at most `max_length` of them."""


@dataclass(frozen=True)
class TextStage:
    """One stage's corpus, tokenised: its name and documents per split."""

    name: str
    train: Sequence[Document]
    dev: Sequence[Document]
    test: Sequence[Document]


@dataclass(frozen=True)
class TextStageRun:
    """Stage `index` about to be trained: the model, every stage's documents, the pad id."""

    model: nn.Module
    stages: Sequence[TextStage]
    index: int
    pad_id: int
    eval_batch_size: int

    @property
    def stage(self) -> TextStage:
        return self.stages[self.index]


def stage_corpus(source: str, spec: SequenceSpec, options: Mapping[str, Any]) -> TextCorpus:
    """Stage `source`'s documents (`load_texts`), `train_size` of them for training (as many for
    dev) and at most `test_size` for test, each sampled with the sequence's seed."""
    corpus = load_texts(source, **options)
    seed = spec.train.seed
    if spec.train_size is not None:
        corpus = sample_texts(corpus, spec.train_size, seed)
    test = corpus.splits["test"]
    if spec.test_size is not None and spec.test_size < len(test):
        picked = sorted(random.Random(seed).sample(range(len(test)), spec.test_size))
        splits = {**corpus.splits, "test": tuple(test[i] for i in picked)}
        note = f" Test capped to {spec.test_size} documents (seed {seed})."
        corpus = TextCorpus(corpus.name, splits, corpus.description + note)
    return corpus


def tokenised(corpus: TextCorpus, tokenizer: PreTrainedTokenizerBase, max_length: int) -> TextStage:
    """`corpus` cut into at most `max_length` tokens a document; a document of fewer than two
    tokens (nothing to predict) is left out."""
    splits: dict[str, list[Document]] = {}
    for split, texts in corpus.splits.items():
        ids = tokenizer(list(texts), truncation=True, max_length=max_length)["input_ids"]
        splits[split] = [tuple(doc) for doc in ids if len(doc) >= 2]
        if not splits[split]:
            raise DataError(
                f"the {split} split of {corpus.name} has no document of two tokens or more"
            )
    return TextStage(corpus.name, splits["train"], splits["dev"], splits["test"])


def collate(documents: Sequence[Document], pad_id: int) -> dict[str, torch.Tensor]:
    """Right-padded `input_ids`, `attention_mask`, and `labels` (the ids, IGNORE_INDEX at pads)."""
    width = max(len(doc) for doc in documents)
    ids = torch.full((len(documents), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(documents), width), dtype=torch.long)
    for row, doc in enumerate(documents):
        ids[row, : len(doc)] = torch.tensor(doc)
        mask[row, : len(doc)] = 1
    labels = ids.masked_fill(mask == 0, IGNORE_INDEX)
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}
