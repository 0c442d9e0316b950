"""The one stage pipeline of a sequence, whatever its stages are (labelled data sets or
corpora): the stages trained in order, each with its own adapter as the strategy names it and
the epoch loop, every stage tested after each one (the matrix R), the state kept after every
stage when a checkpoint is given, and a resumed sequence going on after its last kept stage."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Protocol

import torch
from torch import nn

from adaptlab.methods import save_adapter
from adaptlab.train.config import TrainConfig
from adaptlab.train.continual.checkpoint import SequenceCheckpoint
from adaptlab.train.continual.result import (
    SequenceResult,
    StageOutcome,
    StageRecord,
    sequence_result,
)
from adaptlab.train.continual.spec import SequenceSpec
from adaptlab.train.continual.stages import StageSplits, use_stage_adapter
from adaptlab.train.history import TrainHistory
from adaptlab.train.scale_model import announce_scale
from adaptlab.train.shared_evaluation import shared_evaluation

StageDone = Callable[[int, StageOutcome], None]
"""Called after each stage is trained and tested (and checkpointed): its index and outcome."""


class SequenceStages(Protocol):
    """What one kind of sequence brings to `train_sequence`: its model and stages, and how
    a stage is readied, trained and tested."""

    @property
    def model(self) -> nn.Module: ...

    @property
    def stages(self) -> Sequence[StageSplits]: ...

    def adapter_name(self, stage: int) -> str:
        """The adapter stage `stage` trains (the strategy's choice)."""
        ...

    def labels(self, stage: int) -> tuple[str, ...]:
        """Stage `stage`'s label names, as its record keeps them."""
        ...

    def ready(self, stage: int) -> None:
        """Make stage `stage`'s own parts (a head) the ones that run and train."""
        ...

    def resume(self, carried: Mapping[str, torch.Tensor]) -> None:
        """Take back the strategy's tensors kept with the last finished stage."""
        ...

    def train(
        self, stage: int, config: TrainConfig, learning_rate: float, progress: bool
    ) -> TrainHistory:
        """Train stage `stage` (its adapter added, readied) and keep its best epoch."""
        ...

    def test(self, stage: int, trained: int) -> dict[str, float]:
        """Every test metric and the mean test loss on stage `stage` after stage `trained`."""
        ...

    def state(self) -> dict[str, torch.Tensor]:
        """The strategy's tensors to keep with a finished stage."""
        ...


def train_sequence(
    spec: SequenceSpec,
    stages: SequenceStages,
    progress: bool,
    checkpoint: SequenceCheckpoint | None = None,
    on_stage: StageDone | None = None,
    keep: Path | None = None,
) -> SequenceResult:
    """Train `stages` in order from the first one `checkpoint` has not finished, testing every
    stage after each; the sequence's result. `keep`: a folder to save the last stage's adapter
    to, as it ends the sequence."""
    model, seed = stages.model, spec.train.seed
    announce_scale(model)
    outcomes = list(checkpoint.completed) if checkpoint is not None else []
    for index in range(len(outcomes)):
        use_stage_adapter(model, stages.adapter_name(index), spec.methods, seed + index)
    if checkpoint is not None and outcomes:
        stages.resume(checkpoint.restore(model))
    for index in range(len(outcomes), len(stages.stages)):
        began = time.perf_counter()
        use_stage_adapter(model, stages.adapter_name(index), spec.methods, seed + index)
        stages.ready(index)
        trained = {n for n, p in model.named_parameters() if p.requires_grad}
        trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
        history = stages.train(index, spec.train, spec.learning_rate(), progress)
        with shared_evaluation(model):  # split over a multi-process run's processes
            row = [stages.test(tested, index) for tested in range(len(stages.stages))]
        stage = stages.stages[index]
        record = StageRecord(
            name=stage.name,
            labels=stages.labels(index),
            sizes={"train": len(stage.train), "dev": len(stage.dev), "test": len(stage.test)},
            epochs=tuple(history.epochs),
            best_epoch=history.best_epoch,
            trainable_parameters=trainable,
            seconds=time.perf_counter() - began,
        )
        outcome = StageOutcome(record, tuple(row))
        outcomes.append(outcome)
        if checkpoint is not None:
            checkpoint.save_stage(outcome, model, trained, stages.state())
        if on_stage is not None:
            on_stage(index, outcome)
    if keep is not None:
        save_adapter(
            model, keep, name=stages.adapter_name(len(stages.stages) - 1), base_model_id=spec.model
        )
    return sequence_result(spec, outcomes)
