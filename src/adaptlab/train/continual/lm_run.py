"""A causal-LM sequence (lifelong pretraining): one causal LM trained on corpora in order with
a strategy, each corpus's held-out perplexity measured after every stage (the matrix R)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import torch
from torch import nn

from adaptlab.data.texts import TextCorpus
from adaptlab.models.loading import load_model
from adaptlab.train.config import TrainConfig
from adaptlab.train.continual.checkpoint import SequenceCheckpoint
from adaptlab.train.continual.lm_loop import perplexity, train_text_stage
from adaptlab.train.continual.lm_stages import TextStage, TextStageRun, tokenised
from adaptlab.train.continual.lm_strategy import TextStrategy
from adaptlab.train.continual.registry import make_text_strategy
from adaptlab.train.continual.result import SequenceResult
from adaptlab.train.continual.sequence import StageDone, train_sequence
from adaptlab.train.continual.spec import SequenceSpec
from adaptlab.train.history import TrainHistory
from adaptlab.train.scale_model import prepare_base


class CorpusStages:
    """A causal-LM sequence's model, tokenised corpora and strategy (`SequenceStages`)."""

    def __init__(
        self,
        model: nn.Module,
        stages: Sequence[TextStage],
        pad_id: int,
        strategy: TextStrategy,
        eval_batch_size: int,
    ) -> None:
        self.model, self.stages, self.pad_id, self.strategy = model, stages, pad_id, strategy
        self.eval_batch_size = eval_batch_size

    def adapter_name(self, stage: int) -> str:
        return self.strategy.adapter_name(stage)

    def labels(self, stage: int) -> tuple[str, ...]:
        return ()

    def ready(self, stage: int) -> None:
        """Nothing but the adapter is the stage's own."""

    def resume(self, carried: Mapping[str, torch.Tensor]) -> None:
        """Nothing to take back: a causal-LM strategy carries no tensors between stages."""

    def train(
        self, stage: int, config: TrainConfig, learning_rate: float, progress: bool
    ) -> TrainHistory:
        run = TextStageRun(self.model, self.stages, stage, self.pad_id, self.eval_batch_size)
        self.strategy.begin(run)
        return train_text_stage(run, self.strategy, config, learning_rate, progress=progress)

    def test(self, stage: int, trained: int) -> dict[str, float]:
        self.strategy.route(self.model, stage, trained)
        test = self.stages[stage].test
        measured = perplexity(self.model, test, self.pad_id, self.eval_batch_size)
        return {**measured.metrics(), "loss": measured.loss}

    def state(self) -> dict[str, torch.Tensor]:
        return {}


def train_text_sequence(
    spec: SequenceSpec,
    corpora: Sequence[TextCorpus],
    device: torch.device,
    progress: bool,
    checkpoint: SequenceCheckpoint | None = None,
    on_stage: StageDone | None = None,
    keep: Path | None = None,
) -> SequenceResult:
    """Train `spec.model` as a causal LM through `corpora`, testing every corpus after each;
    the trained adapter is saved to `keep` when given (`adaptlab serve` generates with it)."""
    loaded = load_model(spec.model, "causal_lm", seed=spec.train.seed)
    model: nn.Module = loaded.model
    prepare_base(model, spec.scale, device)
    stages = [tokenised(corpus, loaded.tokenizer, spec.train.max_length) for corpus in corpora]
    strategy = make_text_strategy(spec.strategy)
    eval_batch_size = spec.train.eval_batch_size
    corpus_stages = CorpusStages(
        model, stages, loaded.tokenizer.pad_token_id, strategy, eval_batch_size
    )
    return train_sequence(spec, corpus_stages, progress, checkpoint, on_stage, keep)
