"""A causal-LM sequence (lifelong pretraining): one causal LM trained on corpora in order with
a strategy, each corpus's held-out perplexity measured after every stage (the matrix R)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import torch
from torch import nn

from adaptlab.data.texts import TextCorpus
from adaptlab.models.loading import load_model
from adaptlab.train.continual.checkpoint import SequenceCheckpoint
from adaptlab.train.continual.lm_loop import perplexity, train_text_stage
from adaptlab.train.continual.lm_stages import TextStageRun, tokenised
from adaptlab.train.continual.lm_strategy import make_text_strategy
from adaptlab.train.continual.result import (
    SequenceResult,
    StageOutcome,
    StageRecord,
    sequence_result,
)
from adaptlab.train.continual.spec import SequenceSpec
from adaptlab.train.continual.stages import use_stage_adapter

StageDone = Callable[[int, StageOutcome], None]
"""Called after each stage is trained and tested (and checkpointed): its index and outcome."""


def train_text_sequence(
    spec: SequenceSpec,
    corpora: Sequence[TextCorpus],
    device: torch.device,
    progress: bool,
    checkpoint: SequenceCheckpoint | None = None,
    on_stage: StageDone | None = None,
) -> SequenceResult:
    """Train `spec.model` as a causal LM through `corpora`, testing every corpus after each."""
    loaded = load_model(spec.model, "causal_lm", seed=spec.train.seed)
    model: nn.Module = loaded.model
    model.to(device)
    pad_id = loaded.tokenizer.pad_token_id
    stages = [tokenised(corpus, loaded.tokenizer, spec.train.max_length) for corpus in corpora]
    strategy = make_text_strategy(spec.strategy)
    outcomes = list(checkpoint.completed) if checkpoint is not None else []
    for index in range(len(outcomes)):
        use_stage_adapter(
            model, strategy.adapter_name(index), spec.methods, spec.train.seed + index
        )
    if checkpoint is not None and outcomes:
        checkpoint.restore(model)
    for index in range(len(outcomes), len(stages)):
        began = time.perf_counter()
        name = strategy.adapter_name(index)
        use_stage_adapter(model, name, spec.methods, spec.train.seed + index)
        trained = {n for n, p in model.named_parameters() if p.requires_grad}
        run = TextStageRun(model, stages, index, pad_id, spec.train.eval_batch_size)
        strategy.begin(run)
        history = train_text_stage(
            run, strategy, spec.train, spec.learning_rate(), progress=progress
        )
        row = []
        for tested, other in enumerate(stages):
            strategy.route(model, tested, index)
            measured = perplexity(model, other.test, pad_id, spec.train.eval_batch_size)
            row.append({**measured.metrics(), "loss": measured.loss})
        stage = stages[index]
        record = StageRecord(
            name=stage.name,
            labels=(),
            sizes={"train": len(stage.train), "dev": len(stage.dev), "test": len(stage.test)},
            epochs=tuple(history.epochs),
            best_epoch=history.best_epoch,
            trainable_parameters=sum(p.numel() for p in model.parameters() if p.requires_grad),
            seconds=time.perf_counter() - began,
        )
        outcome = StageOutcome(record, tuple(row))
        outcomes.append(outcome)
        if checkpoint is not None:
            checkpoint.save_stage(outcome, model, trained, {})
        if on_stage is not None:
            on_stage(index, outcome)
    return sequence_result(spec, outcomes)
