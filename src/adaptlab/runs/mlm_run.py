"""A masked-LM run (task mlm): the spec's documents sampled to `train_size`, the model loaded
with a masked-LM head and its adapter attached, every split encoded; after training, the
masked-token loss, accuracy and perplexity on the test documents. Such a run trains one
adapter (or one stacked on others), never a fusion, and takes no analyses."""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from pathlib import Path

import torch
from torch import nn

from adaptlab.data.generative import sample_corpus
from adaptlab.data.masking import MaskedLmEncoder
from adaptlab.data.texts import TextCorpus, load_texts
from adaptlab.engine.adapters import attach_adapters
from adaptlab.engine.run_objective import Tested
from adaptlab.engine.scale_model import prepare_base
from adaptlab.methods.handle import AdaptHandle
from adaptlab.models.loading import load_model
from adaptlab.records.result import DataInfo
from adaptlab.records.spec import RunSpec
from adaptlab.records.split_record import SplitRecord
from adaptlab.runs.mlm_objective import MaskedLm, evaluate_mlm
from adaptlab.runs.preparers import prepares
from adaptlab.tasks.mlm import MaskedLanguageModelling
from adaptlab.tasks.registry import LABELLED


class MaskedLmRun(MaskedLm):
    """`MaskedLm` over a run's documents, with what `execute` asks (`RunObjective`)."""

    trained = None  # a masked-LM run takes no analyses

    def __init__(
        self,
        spec: RunSpec,
        model: nn.Module,
        handle: AdaptHandle,
        encoder: MaskedLmEncoder,
        corpus: TextCorpus,
    ) -> None:
        self.features = {name: encoder.encode(texts) for name, texts in corpus.splits.items()}
        train, dev = self.features["train"], self.features["dev"]
        super().__init__(model, encoder, train, dev, spec.train.eval_batch_size)
        self.spec, self.handle, self.corpus = spec, handle, corpus
        self.description = corpus.description

    @property
    def data(self) -> DataInfo:
        sizes = {k: len(v) for k, v in self.corpus.splits.items()}
        return DataInfo(name=self.corpus.name, task=self.spec.task or "", labels=(), sizes=sizes)

    @property
    def splits(self) -> SplitRecord:
        return SplitRecord.of(self.spec.data, self.corpus.origins)

    def frozen_replay(self, mode: str, folder: Path | None) -> AbstractContextManager[None]:
        """Nothing to replay: an example's masks, hence its tokens, change every epoch."""
        return nullcontext()

    def test(self) -> Tested:
        test = evaluate_mlm(self.model, self.encoder, self.features["test"], self.eval_batch_size)
        return Tested(test.loss, test.metrics)


@prepares(MaskedLanguageModelling)
def prepare_masked_lm(
    task: MaskedLanguageModelling, spec: RunSpec, device: torch.device
) -> MaskedLmRun:
    """Read `spec`'s documents, load its model with a masked-LM head on `device`, adapt it."""
    corpus = load_texts(spec.data, LABELLED, **spec.data_options)
    if spec.train_size is not None:
        corpus = sample_corpus(corpus, spec.train_size, spec.train.seed, unit="documents")
    loaded = load_model(spec.model, "masked_lm", seed=spec.train.seed)
    model: nn.Module = loaded.model
    prepare_base(model, spec.scale, device)
    handle = attach_adapters(model, spec)
    encoder = MaskedLmEncoder(loaded.tokenizer, spec.train.max_length)
    return MaskedLmRun(spec, model, handle, encoder, corpus)
