"""The one stage pipeline of a sequence, whatever its objective (labelled data sets or
corpora): the stages trained in order, each with the adapter the strategy names, readied and
trained in the stage loop (`stage_loop.train_stage`) between the strategy's `begin` and `end`,
every stage tested after each one with the strategy's routing (the matrix R), every pass over
the model at the sequence's precision (`engine.precision.autocast_at`), the state kept
after every stage when a checkpoint is given (the strategy's tensors with it), and a resumed
sequence going on after its last kept stage."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from adaptlab.continual.checkpoint import SequenceCheckpoint
from adaptlab.continual.result import (
    SequenceResult,
    StageOutcome,
    StageRecord,
    sequence_result,
)
from adaptlab.continual.spec import SequenceSpec
from adaptlab.continual.stage_loop import train_stage
from adaptlab.continual.stages import SequenceStages, use_stage_adapter
from adaptlab.continual.strategy import Strategy
from adaptlab.engine.precision import autocast_at
from adaptlab.engine.scale_model import announce_scale
from adaptlab.methods.persistence import save_adapter
from adaptlab.parallel.shared_evaluation import shared_evaluation

StageDone = Callable[[int, StageOutcome], None]
"""Called after each stage is trained and tested (and checkpointed): its index and outcome."""


def train_sequence(
    spec: SequenceSpec,
    stages: SequenceStages,
    strategy: Strategy[Any, Any],
    progress: bool,
    checkpoint: SequenceCheckpoint | None = None,
    on_stage: StageDone | None = None,
    keep: Path | None = None,
) -> SequenceResult:
    """Train `stages` with `strategy` in order from the first one `checkpoint` has not
    finished, testing every stage after each; the sequence's result. `keep`: a folder to save
    the last stage's adapter to, as it ends the sequence (with what its manifest records:
    `stages.kept`)."""
    model, seed, scale = stages.model, spec.train.seed, spec.scale
    announce_scale(model, scale)
    device = next(model.parameters()).device
    outcomes = list(checkpoint.completed) if checkpoint is not None else []
    for index in range(len(outcomes)):
        use_stage_adapter(model, strategy.adapter_name(index), spec.methods, seed + index)
    if checkpoint is not None and outcomes:
        strategy.load_state(model, checkpoint.restore(model))
    for index in range(len(outcomes), len(stages.stages)):
        began = time.perf_counter()
        use_stage_adapter(model, strategy.adapter_name(index), spec.methods, seed + index)
        stages.ready(index)
        trained = {n for n, p in model.named_parameters() if p.requires_grad}
        trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
        run = stages.run(index)
        with autocast_at(scale.precision, device):
            strategy.begin(run)
        history = train_stage(
            run, strategy, spec.train, spec.learning_rate(), scale=scale, progress=progress
        )
        # every stage's test, split over a multi-process run's processes
        with autocast_at(scale.precision, device), shared_evaluation(model):
            row = [_test(stages, strategy, tested, index) for tested in range(len(stages.stages))]
        stage = stages.stages[index]
        record = StageRecord(
            name=stage.name,
            labels=stages.labels(index),
            sizes={"train": len(stage.train), "dev": len(stage.dev), "test": len(stage.test)},
            epochs=tuple(history.epochs),
            best_epoch=history.best_epoch,
            trainable_parameters=trainable,
            seconds=time.perf_counter() - began,
            dropped=stages.dropped(index),
        )
        outcome = StageOutcome(record, tuple(row))
        outcomes.append(outcome)
        if checkpoint is not None:
            checkpoint.save_stage(outcome, model, trained, strategy.state())
        if on_stage is not None:
            on_stage(index, outcome)
    if keep is not None:
        last = strategy.adapter_name(len(stages.stages) - 1)
        kept = stages.kept
        save_adapter(
            model,
            keep,
            name=last,
            base_model_id=spec.model,
            task=kept.task,
            chat_template=kept.chat_template,
        )
    return sequence_result(spec, outcomes)


def _test(
    stages: SequenceStages, strategy: Strategy[Any, Any], stage: int, trained: int
) -> dict[str, float]:
    """Stage `stage`'s test metrics after stage `trained`, routed as the strategy routes."""
    strategy.route(stages.model, stage, trained)
    return stages.test(stage)
