"""`causal-lm`: lifelong pretraining (Jin et al. 2022). Each stage is a corpus of documents (a
built-in's texts, a .txt file, a text column: `load_texts` sources), `train_size` documents for
training (as many for dev) and at most `test_size` for test; the model is a decoder-only causal
LM trained on next-token prediction, the matrix holds each corpus's held-out perplexity, and
the adapter the last stage trained is kept with the sequence (`adaptlab serve` generates with
it)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from adaptlab.continual.objectives import register_objective
from adaptlab.continual.sequence_objective import SequenceObjective, SequenceSettings

if TYPE_CHECKING:
    import torch

    from adaptlab.continual.corpus_stages import CorpusStages
    from adaptlab.data.texts import TextCorpus


class CausalLm(SequenceObjective):
    """A causal LM trained on each corpus in turn, scored by held-out perplexity."""

    name = "causal-lm"
    description = (
        "lifelong pretraining of a decoder-only causal LM: each stage a corpus, held-out perplexity"
    )
    metric = "perplexity"
    unit = "documents"
    data_options = ("text_column",)
    needs_causal_lm = True
    keeps_adapter = True

    def read_stage(
        self, source: str, options: Mapping[str, Any], spec: SequenceSettings
    ) -> TextCorpus:
        from adaptlab.continual.corpus_stages import stage_corpus

        return stage_corpus(source, spec, options)

    def load_stages(
        self, spec: SequenceSettings, data: Sequence[Any], device: torch.device
    ) -> CorpusStages:
        from adaptlab.continual.corpus_stages import CorpusStages

        return CorpusStages.load(spec, data, device)


CAUSAL_LM = register_objective(CausalLm())
