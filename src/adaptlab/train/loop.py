"""The training loop of paper-effectiveness §3 / App. A.2.

AdamW with a linear schedule and warm-up, a fixed number of epochs, evaluation on dev after
every epoch, and the best epoch's weights kept (restored into the model at the end).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from adaptlab.data import TextEncoder
from adaptlab.errors import AdaptlabError
from adaptlab.methods import regularization_loss
from adaptlab.progress import Progress
from adaptlab.tasks import TaskKind
from adaptlab.train.batches import batch_count, indexed_batches
from adaptlab.train.config import TrainConfig
from adaptlab.train.evaluate import evaluate
from adaptlab.train.frozen_cache import FrozenCache
from adaptlab.train.metrics import PRIMARY_METRIC
from adaptlab.train.result import EpochRecord

log = logging.getLogger("adaptlab.train")


class TrainingError(AdaptlabError):
    """Training cannot go on (a NaN loss, say)."""


@dataclass
class TrainHistory:
    """Per-epoch records and the best epoch (by the task's primary dev metric)."""

    metric: str
    epochs: list[EpochRecord] = field(default_factory=list)
    best_epoch: int = 0

    @property
    def best(self) -> EpochRecord:
        return self.epochs[self.best_epoch - 1]


class BestEpoch:
    """The trainable tensors of the best dev epoch so far, put back when training ends."""

    def __init__(self, trainable: Sequence[tuple[str, nn.Parameter]], history: TrainHistory):
        self.trainable, self.history = trainable, history
        self.score = -math.inf
        self.state: dict[str, torch.Tensor] | None = None

    def offer(self, epoch: int, score: float) -> None:
        """Keep the tensors as they are now if `score` beats every earlier epoch's."""
        if score > self.score:
            self.score, self.history.best_epoch = score, epoch
            self.state = {n: p.detach().clone() for n, p in self.trainable}

    @torch.no_grad()
    def restore(self) -> None:
        """Put the best epoch's tensors back in place."""
        assert self.state is not None
        for name, param in self.trainable:
            param.copy_(self.state[name])


def train(
    model: nn.Module,
    encoder: TextEncoder,
    train_features: Sequence[dict[str, Any]],
    dev_features: Sequence[dict[str, Any]],
    task: TaskKind,
    label_names: Sequence[str],
    config: TrainConfig,
    learning_rate: float,
    *,
    progress: bool = True,
    frozen_cache: str = "auto",
    cache_folder: Path | None = None,
) -> TrainHistory:
    """Train `model`'s trainable parameters; on return it holds the best epoch's weights.

    `frozen_cache` ("auto", "memory", "disk", "off"): replay the frozen front's outputs after
    the first epoch where the running adapter allows it (`adaptlab.train.frozen_cache`); on
    disk, its scratch files go in `cache_folder` (a temporary folder when None).
    """
    cache = FrozenCache.create(model, frozen_cache, train_features, cache_folder)
    try:
        return _train(
            model,
            encoder,
            train_features,
            dev_features,
            task,
            label_names,
            config,
            learning_rate,
            progress,
            cache,
        )
    finally:
        if cache is not None:
            cache.close()


def _train(
    model: nn.Module,
    encoder: TextEncoder,
    train_features: Sequence[dict[str, Any]],
    dev_features: Sequence[dict[str, Any]],
    task: TaskKind,
    label_names: Sequence[str],
    config: TrainConfig,
    learning_rate: float,
    progress: bool,
    cache: FrozenCache | None,
) -> TrainHistory:
    device = next(model.parameters()).device
    trainable = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    steps_per_epoch = batch_count(len(train_features), config.batch_size)
    total_steps = steps_per_epoch * config.epochs
    optimizer, scheduler = optimizer_and_schedule(trainable, config, learning_rate, total_steps)
    generator = torch.Generator().manual_seed(config.seed)
    torch.manual_seed(config.seed)  # dropout masks
    history = TrainHistory(metric=PRIMARY_METRIC[task])
    best = BestEpoch(trainable, history)
    step = 0
    bar = Progress(total_steps, unit="step", enabled=progress, lines=0)  # a line per epoch
    for epoch in range(1, config.epochs + 1):
        model.train()
        started, losses = time.perf_counter(), []
        bar.describe(f"epoch {epoch}/{config.epochs}")
        for indices, batch in indexed_batches(
            encoder, train_features, config.batch_size, device, generator
        ):
            replay = cache.step(indices, batch.get("attention_mask")) if cache else nullcontext()
            with replay:
                loss = model(**batch).loss
            penalty = regularization_loss(model)  # AdapterFusion's value penalty, when asked
            if penalty is not None:
                loss = loss + penalty
            stop_unless_finite(loss, f"at epoch {epoch}, step {step + 1}", learning_rate, bar)
            losses.append(apply_step(loss, optimizer, scheduler, trainable, config.max_grad_norm))
            step += 1
            bar.update()
            bar.show(loss=f"{losses[-1]:.4f}")
        dev = evaluate(model, encoder, dev_features, task, label_names, config.eval_batch_size)
        record = EpochRecord(
            epoch=epoch,
            step=step,
            train_loss=sum(losses) / len(losses),
            dev_loss=dev.loss,
            dev_metrics=dev.metrics,
            seconds=time.perf_counter() - started,
        )
        history.epochs.append(record)
        score = dev.metrics[history.metric]
        log.info(
            "epoch %d step %d train_loss %.4f dev_loss %.4f dev_%s %.4f",
            epoch,
            step,
            record.train_loss,
            dev.loss,
            history.metric,
            score,
        )
        best.offer(epoch, score)
        bar.show(loss=f"{record.train_loss:.4f}", **{f"dev_{history.metric}": f"{score:.4f}"})
        bar.line()
    bar.close()
    best.restore()
    return history


def optimizer_and_schedule(
    trainable: Sequence[tuple[str, nn.Parameter]],
    config: TrainConfig,
    learning_rate: float,
    total_steps: int,
) -> tuple[torch.optim.Optimizer, torch.optim.lr_scheduler.LambdaLR]:
    """AdamW (weight decay on matrices only) and the linear warm-up and decay schedule."""
    optimizer = torch.optim.AdamW(
        [
            {
                "params": [p for _, p in trainable if p.ndim >= 2],
                "weight_decay": config.weight_decay,
            },
            {"params": [p for _, p in trainable if p.ndim < 2], "weight_decay": 0.0},
        ],
        lr=learning_rate,
    )
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, _linear_warmup(math.ceil(config.warmup_ratio * total_steps), total_steps)
    )
    return optimizer, scheduler


def stop_unless_finite(loss: torch.Tensor, where: str, learning_rate: float, bar: Progress) -> None:
    """Close the progress bar and stop with one line when the loss is not a finite number."""
    if not torch.isfinite(loss):
        bar.close()
        raise TrainingError(
            f"loss became {loss.item()} {where}; lower the learning rate (now {learning_rate:g})"
        )


def apply_step(
    loss: torch.Tensor,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
    trainable: Sequence[tuple[str, nn.Parameter]],
    max_grad_norm: float,
) -> float:
    """Back-propagate `loss`, clip the gradients' norm, step the optimizer and the schedule;
    the loss as a number."""
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_([p for _, p in trainable], max_grad_norm)
    optimizer.step()
    scheduler.step()
    return loss.item()


def _linear_warmup(warmup: int, total: int) -> Callable[[int], float]:
    """LR multiplier: linear ramp over `warmup` steps, then linear decay to 0 at `total`."""

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        return max(0.0, (total - step) / max(1, total - warmup))

    return factor
