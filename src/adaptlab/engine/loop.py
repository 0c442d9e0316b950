"""The one epoch loop: every training adaptlab does (a run of any task, a continual stage) is
this loop over an objective (`adaptlab.engine.objective`).

The protocol of paper-effectiveness §3 / App. A.2: AdamW with a linear schedule and warm-up,
a fixed number of epochs over the examples in a seeded order, evaluation on dev after every
epoch, and the best epoch's weights kept (restored into the model at the end). A step is
forward and loss (the objective's, plus what the running adapters add), the finite-loss check,
backward, gradient clipping, the optimiser and the schedule; an objective that trains on each
batch for several steps (`objective.ReusesBatches`, GRPO's mu) makes its batch once for them.
The run's scale (its `records.scale.Scale`, passed by whoever trains) sets the precision the
forward passes (training and dev) run at, with float32 copies of what trains, and whether
activations wait in host memory.
"""

from __future__ import annotations

import logging
import time
from contextlib import nullcontext
from typing import Any

import torch
from torch import nn

from adaptlab.engine.checkpointing import offloaded_activations
from adaptlab.engine.data_parallel import data_parallel
from adaptlab.engine.events import tell_epoch, tell_step
from adaptlab.engine.history import BestEpoch, TrainHistory
from adaptlab.engine.objective import Objective, updates_per_batch
from adaptlab.engine.precision import Precision, keep_trained_in_float32
from adaptlab.engine.thread_governor import ThreadGovernor
from adaptlab.engine.training_checkpoint import (
    LoopState,
    Position,
    Resumable,
    TrainingCheckpoint,
    TrainingPlan,
)
from adaptlab.errors import AdaptlabError
from adaptlab.methods.adapt import regularization_loss
from adaptlab.parallel.ranks import is_main_process
from adaptlab.parallel.shared_evaluation import shared_evaluation
from adaptlab.progress import Progress
from adaptlab.records.config import TrainConfig
from adaptlab.records.result import EpochRecord
from adaptlab.records.scale import Scale

log = logging.getLogger("adaptlab.train")


class TrainingError(AdaptlabError):
    """Training cannot go on (a NaN loss, say)."""


def train_epochs(
    model: nn.Module,
    objective: Objective[Any],
    config: TrainConfig,
    learning_rate: float,
    *,
    scale: Scale,
    progress: bool = True,
    seed: int | None = None,
    checkpoint: TrainingCheckpoint | None = None,
) -> TrainHistory:
    """Train `model`'s trainable tensors on `objective`; on return it holds the best dev
    epoch's. `scale` (the one `model` was prepared for, `engine.scale_model.prepare_base`) sets
    the precision of the training and dev passes and whether activations are offloaded.
    `seed` (default `config.seed`) seeds the example order, the objective's draws and dropout.
    `checkpoint`, if given, saves the state as it asks and, when it holds one, the training
    goes on from it. In a process group each process trains on its share of every batch
    (`adaptlab.engine.data_parallel`)."""
    seed = config.seed if seed is None else seed
    trainable = keep_trained_in_float32(model)
    parameters = [p for _, p in trainable]
    device = next(model.parameters()).device
    precision = Precision(scale.precision, device)
    offloaded = (
        offloaded_activations(device, model.parameters())
        if scale.offload_activations
        else nullcontext()
    )
    updates = updates_per_batch(objective)
    plan = TrainingPlan.of(objective.examples, config, objective.metric, updates)
    per_epoch, total_steps = plan.per_epoch, plan.per_epoch * config.epochs
    parts = Resumable.build(trainable, config, learning_rate, plan, precision.scaler, seed)
    optimizer, scheduler, generator = parts.optimizer, parts.scheduler, parts.generator
    torch.manual_seed(seed)  # dropout masks
    history = TrainHistory(metric=objective.metric)
    best = BestEpoch(trainable, history)
    at = Position()
    if checkpoint is not None and checkpoint.exists():
        state = checkpoint.load(parts, plan)
        at, precision.skipped = state.position, state.skipped
        history.epochs[:], history.best_epoch = state.epochs, state.best_epoch
        best.score, best.state = state.best_score, state.best
        log.info("resumed at %sepoch %d step %d", objective.title, at.epoch, at.step)

    def save(epoch_ended: bool) -> None:
        if checkpoint is None or not is_main_process() or not checkpoint.due(at.step, epoch_ended):
            return
        state = LoopState(
            at, history.epochs, history.best_epoch, best.score, best.state, precision.skipped
        )
        checkpoint.save(parts, state)

    bar = Progress(total_steps, unit="step", enabled=progress, lines=0)  # a line per epoch
    bar.update(at.step)
    with data_parallel(model, device) as parallel, ThreadGovernor() as governor:
        if parallel.processes > 1:
            log.info(
                "data parallel over %d processes: %d bytes of gradients all-reduced per step",
                parallel.processes,
                parallel.bytes_per_step,
            )
        while at.epoch <= config.epochs:
            model.train()
            started = time.perf_counter() - at.seconds
            place = f"{objective.title}epoch {at.epoch}"
            bar.describe(f"{place}/{config.epochs}")
            if at.order is None:
                at.order = torch.randperm(objective.examples, generator=generator).tolist()
            held: tuple[Any, float] | None = None  # this process's part of the batch, its weight
            while at.done < per_epoch:
                if at.done % updates == 0:  # a new batch, trained on for `updates` steps
                    first = at.done // updates * config.batch_size
                    batch = objective.batch(at.order[first : first + config.batch_size], generator)
                    held = parallel.share(objective, batch)
                assert held is not None, "an epoch resumes at a batch's first step"
                part, weight = held
                with precision.autocast(), offloaded:
                    loss = objective.loss(part)
                    penalty = regularization_loss(model)  # AdapterFusion's value penalty
                    if penalty is not None:
                        loss = loss + penalty
                _stop_unless_finite(loss, place, at.step, learning_rate, bar)
                rate = optimizer.param_groups[0]["lr"]  # this step's, before the schedule moves
                weighted = loss if weight == 1.0 else loss * weight
                if precision.step(weighted, optimizer, parameters, config.max_grad_norm):
                    scheduler.step()
                at.losses.append(parallel.mean(loss.item(), weight))
                at.step, at.done = at.step + 1, at.done + 1
                at.seconds = time.perf_counter() - started
                tell_step(objective.title, at.step, at.losses[-1], rate)
                governor.tick(at.step)
                bar.update()
                bar.show(loss=f"{at.losses[-1]:.4f}")
                if at.done < per_epoch:
                    save(epoch_ended=False)
            with precision.autocast(), shared_evaluation(model):
                dev = objective.dev()
            record = EpochRecord(
                epoch=at.epoch,
                step=at.step,
                train_loss=sum(at.losses) / len(at.losses),
                dev_loss=dev.loss,
                dev_metrics=dev.metrics,
                seconds=time.perf_counter() - started,
            )
            history.epochs.append(record)
            tell_epoch(objective.title, record, history.metric)
            shown = dev.metrics[history.metric]
            log.info(
                "%sepoch %d step %d train_loss %.4f dev_loss %.4f dev_%s %.4f",
                *(objective.title, at.epoch, at.step, record.train_loss, dev.loss),
                *(history.metric, shown),
            )
            best.offer(at.epoch, dev)
            bar.show(loss=f"{record.train_loss:.4f}", **{f"dev_{history.metric}": f"{shown:.4f}"})
            bar.line()
            at = Position(epoch=at.epoch + 1, step=at.step)
            save(epoch_ended=True)
    bar.close()
    if precision.skipped:
        log.info(
            "%d of %d fp16 steps skipped: their gradients overflowed", precision.skipped, at.step
        )
    best.restore()
    return history


def _stop_unless_finite(
    loss: torch.Tensor, place: str, steps_done: int, learning_rate: float, bar: Progress
) -> None:
    """Close the progress bar and stop with one line when the loss is not a finite number:
    after `steps_done` updates, blame the learning rate; before any, the data or the objective
    (no update has been made for the rate to have caused it)."""
    if torch.isfinite(loss):
        return
    bar.close()
    where = f"at {place}, step {steps_done + 1}"
    if steps_done == 0:
        raise TrainingError(
            f"loss is {loss.item()} {where}, before any update: the learning rate is not the "
            "cause; check the data and the objective's options (a --beta too large to compute, "
            "say)"
        )
    raise TrainingError(
        f"loss became {loss.item()} {where}; lower the learning rate (now {learning_rate:g})"
    )
