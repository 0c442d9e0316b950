"""The stages of a causal-LM sequence (lifelong pretraining): each a corpus of documents sampled
to the sequence's sizes (`stage_corpus`) and tokenised for the model (`tokenised`); the model
loaded as a causal LM; a stage trained as a `TextStageRun` and tested by its held-out
perplexity."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch import nn
from transformers import PreTrainedTokenizerBase

from adaptlab.continual.corpus_run import Document, TextStage, TextStageRun, perplexity
from adaptlab.continual.sequence_objective import SequenceSettings
from adaptlab.continual.stages import KeptAdapter
from adaptlab.data.generative import sample_corpus
from adaptlab.data.texts import TextCorpus, load_texts
from adaptlab.engine.scale_model import prepare_base
from adaptlab.errors import DataError
from adaptlab.models.loading import load_model
from adaptlab.tasks.registry import LABELLED


class CorpusStages:
    """A causal-LM sequence's model and tokenised corpora (`SequenceStages`)."""

    kept = KeptAdapter()
    """Nothing but the adapter's tensors (no task of `adaptlab train`, no chat template)."""

    def __init__(
        self, model: nn.Module, stages: Sequence[TextStage], pad_id: int, eval_batch_size: int
    ) -> None:
        self.model, self.stages, self.pad_id = model, stages, pad_id
        self.eval_batch_size = eval_batch_size

    @classmethod
    def load(
        cls, spec: SequenceSettings, corpora: Sequence[TextCorpus], device: torch.device
    ) -> CorpusStages:
        """`spec`'s model on `device` as a causal LM, and the corpora tokenised for it."""
        loaded = load_model(spec.model, "causal_lm", seed=spec.train.seed)
        model: nn.Module = loaded.model
        prepare_base(model, spec.scale, device)
        stages = [tokenised(corpus, loaded.tokenizer, spec.train.max_length) for corpus in corpora]
        return cls(model, stages, loaded.tokenizer.pad_token_id, spec.train.eval_batch_size)

    def dropped(self, stage: int) -> dict[str, int]:
        return {}

    def labels(self, stage: int) -> tuple[str, ...]:
        return ()

    def ready(self, stage: int) -> None:
        """Nothing but the adapter is the stage's own."""

    def run(self, stage: int) -> TextStageRun:
        return TextStageRun(
            self.model, self.stages, stage, self.eval_batch_size, pad_id=self.pad_id
        )

    def test(self, stage: int) -> dict[str, float]:
        measured = perplexity(
            self.model, self.stages[stage].test, self.pad_id, self.eval_batch_size
        )
        return {**measured.metrics(), "loss": measured.loss}


def stage_corpus(source: str, spec: SequenceSettings, options: Mapping[str, Any]) -> TextCorpus:
    """Stage `source`'s documents (`load_texts`), `train_size` of them for training (as many for
    dev) and at most `test_size` for test, each sampled with the sequence's seed."""
    corpus = load_texts(source, LABELLED, **options)
    seed = spec.train.seed
    if spec.train_size is not None:
        corpus = sample_corpus(corpus, spec.train_size, seed, unit="documents")
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
