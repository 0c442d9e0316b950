"""The epochs of one stage, whatever the stage trains for: the protocol of
`adaptlab.train.loop` (AdamW, linear warm-up and decay, the best dev epoch kept) over the
stage's examples in a seeded order, each batch joined by the strategy's replayed rows."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import nn

from adaptlab.progress import Progress
from adaptlab.train.batches import batch_count
from adaptlab.train.config import TrainConfig
from adaptlab.train.continual.stages import Row
from adaptlab.train.loop import (
    BestEpoch,
    TrainHistory,
    apply_step,
    optimizer_and_schedule,
    stop_unless_finite,
)
from adaptlab.train.result import EpochRecord


@dataclass(frozen=True)
class DevScore:
    """One epoch's dev evaluation: mean loss, metrics, and the score the best epoch is chosen
    by (higher is better)."""

    loss: float
    metrics: dict[str, float]
    score: float


@dataclass(frozen=True)
class StageTraining:
    """What one kind of stage brings to the epochs: its place in the sequence, its size, the
    loss of a batch of rows, the strategy's replayed rows, and its dev evaluation."""

    name: str
    index: int
    stages: int
    examples: int
    metric: str
    batch_loss: Callable[[Sequence[Row]], torch.Tensor]
    replayed: Callable[[int, torch.Generator], list[Row]]
    dev: Callable[[], DevScore]


def train_epochs(
    model: nn.Module,
    stage: StageTraining,
    config: TrainConfig,
    learning_rate: float,
    *,
    progress: bool = True,
) -> TrainHistory:
    """Train the model's trainable tensors on `stage`; on return it holds the best dev epoch."""
    trainable = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    total_steps = batch_count(stage.examples, config.batch_size) * config.epochs
    optimizer, scheduler = optimizer_and_schedule(trainable, config, learning_rate, total_steps)
    generator = torch.Generator().manual_seed(config.seed + stage.index)
    torch.manual_seed(config.seed + stage.index)  # dropout masks
    history = TrainHistory(metric=stage.metric)
    best = BestEpoch(trainable, history)
    step = 0
    bar = Progress(total_steps, unit="step", enabled=progress, lines=0)
    for epoch in range(1, config.epochs + 1):
        model.train()
        started, losses = time.perf_counter(), []
        bar.describe(f"stage {stage.index + 1}/{stage.stages} {stage.name} epoch {epoch}")
        order = torch.randperm(stage.examples, generator=generator).tolist()
        for start in range(0, len(order), config.batch_size):
            rows: list[Row] = [(stage.index, i) for i in order[start : start + config.batch_size]]
            rows += stage.replayed(len(rows), generator)
            loss = stage.batch_loss(rows)
            where = f"in stage {stage.name}, epoch {epoch}, step {step + 1}"
            stop_unless_finite(loss, where, learning_rate, bar)
            losses.append(apply_step(loss, optimizer, scheduler, trainable, config.max_grad_norm))
            step += 1
            bar.update()
            bar.show(loss=f"{losses[-1]:.4f}")
        dev = stage.dev()
        history.epochs.append(
            EpochRecord(
                epoch=epoch,
                step=step,
                train_loss=sum(losses) / len(losses),
                dev_loss=dev.loss,
                dev_metrics=dev.metrics,
                seconds=time.perf_counter() - started,
            )
        )
        best.offer(epoch, dev.score)
        bar.line()
    bar.close()
    best.restore()
    return history
