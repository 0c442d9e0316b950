"""The one epoch loop: every training adaptlab does (a run of any task, a continual stage) is
this loop over an objective (`adaptlab.train.objective`).

The protocol of paper-effectiveness §3 / App. A.2: AdamW with a linear schedule and warm-up,
a fixed number of epochs over the examples in a seeded order, evaluation on dev after every
epoch, and the best epoch's weights kept (restored into the model at the end). A step is
forward and loss (the objective's, plus what the running adapters add), the finite-loss check,
backward, gradient clipping, the optimiser and the schedule. The model's scale
(`adaptlab.train.scale_model`) sets the precision the forward passes (training and dev) run
at, with float32 copies of what trains, and whether activations wait in host memory.
"""

from __future__ import annotations

import logging
import time
from contextlib import nullcontext
from typing import Any

import torch
from torch import nn

from adaptlab.errors import AdaptlabError
from adaptlab.methods import regularization_loss
from adaptlab.progress import Progress
from adaptlab.train.batches import batch_count
from adaptlab.train.checkpointing import offloaded_activations
from adaptlab.train.config import TrainConfig
from adaptlab.train.history import BestEpoch, TrainHistory
from adaptlab.train.objective import Objective
from adaptlab.train.optimizer import optimizer_and_schedule
from adaptlab.train.precision import Precision, keep_trained_in_float32
from adaptlab.train.result import EpochRecord
from adaptlab.train.scale_model import scale_of

log = logging.getLogger("adaptlab.train")


class TrainingError(AdaptlabError):
    """Training cannot go on (a NaN loss, say)."""


def train_epochs(
    model: nn.Module,
    objective: Objective[Any],
    config: TrainConfig,
    learning_rate: float,
    *,
    progress: bool = True,
    seed: int | None = None,
) -> TrainHistory:
    """Train `model`'s trainable tensors on `objective`; on return it holds the best dev
    epoch's. `seed` (default `config.seed`) seeds the example order, the objective's draws and
    dropout."""
    seed = config.seed if seed is None else seed
    trainable = keep_trained_in_float32(model)
    parameters = [p for _, p in trainable]
    scale = scale_of(model)
    device = next(model.parameters()).device
    precision = Precision(scale.precision, device)
    offloaded = (
        offloaded_activations(device, model.parameters())
        if scale.offload_activations
        else nullcontext()
    )
    total_steps = batch_count(objective.examples, config.batch_size) * config.epochs
    optimizer, scheduler = optimizer_and_schedule(trainable, config, learning_rate, total_steps)
    generator = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)  # dropout masks
    history = TrainHistory(metric=objective.metric)
    best = BestEpoch(trainable, history)
    step = 0
    bar = Progress(total_steps, unit="step", enabled=progress, lines=0)  # a line per epoch
    for epoch in range(1, config.epochs + 1):
        model.train()
        started, losses = time.perf_counter(), []
        place = f"{objective.title}epoch {epoch}"
        bar.describe(f"{place}/{config.epochs}")
        order = torch.randperm(objective.examples, generator=generator).tolist()
        for start in range(0, len(order), config.batch_size):
            batch = objective.batch(order[start : start + config.batch_size], generator)
            with precision.autocast(), offloaded:
                loss = objective.loss(batch)
                penalty = regularization_loss(model)  # AdapterFusion's value penalty, when asked
                if penalty is not None:
                    loss = loss + penalty
            _stop_unless_finite(loss, f"at {place}, step {step + 1}", learning_rate, bar)
            if precision.step(loss, optimizer, parameters, config.max_grad_norm):
                scheduler.step()
            losses.append(loss.item())
            step += 1
            bar.update()
            bar.show(loss=f"{losses[-1]:.4f}")
        with precision.autocast():
            dev = objective.dev()
        record = EpochRecord(
            epoch=epoch,
            step=step,
            train_loss=sum(losses) / len(losses),
            dev_loss=dev.loss,
            dev_metrics=dev.metrics,
            seconds=time.perf_counter() - started,
        )
        history.epochs.append(record)
        shown = dev.metrics[history.metric]
        log.info(
            "%sepoch %d step %d train_loss %.4f dev_loss %.4f dev_%s %.4f",
            *(objective.title, epoch, step, record.train_loss, dev.loss, history.metric, shown),
        )
        best.offer(epoch, dev.score)
        bar.show(loss=f"{record.train_loss:.4f}", **{f"dev_{history.metric}": f"{shown:.4f}"})
        bar.line()
    bar.close()
    if precision.skipped:
        log.info("%d of %d fp16 steps skipped: their gradients overflowed", precision.skipped, step)
    best.restore()
    return history


def _stop_unless_finite(
    loss: torch.Tensor, where: str, learning_rate: float, bar: Progress
) -> None:
    """Close the progress bar and stop with one line when the loss is not a finite number."""
    if not torch.isfinite(loss):
        bar.close()
        raise TrainingError(
            f"loss became {loss.item()} {where}; lower the learning rate (now {learning_rate:g})"
        )
