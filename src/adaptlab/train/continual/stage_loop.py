"""Training of one stage of a sequence: the protocol of `adaptlab.train.loop` (AdamW, linear
warm-up and decay, best epoch on the stage's dev set), with the strategy's replayed examples
in each batch, each example scored by its own stage's head, the strategy's penalty added, and
the strategy's `end` called once the best epoch's weights are back."""

from __future__ import annotations

import math
import time
from collections.abc import Sequence

import torch
import torch.nn.functional as F

from adaptlab.progress import Progress
from adaptlab.train.batches import batch_count
from adaptlab.train.config import TrainConfig
from adaptlab.train.continual.stages import HiddenStates, Row, StageRun
from adaptlab.train.continual.strategy import Strategy
from adaptlab.train.evaluate import evaluate
from adaptlab.train.loop import (
    BestEpoch,
    TrainHistory,
    TrainingError,
    _linear_warmup,
    apply_step,
)
from adaptlab.train.metrics import PRIMARY_METRIC
from adaptlab.train.result import EpochRecord


def train_stage(
    run: StageRun,
    strategy: Strategy,
    config: TrainConfig,
    learning_rate: float,
    *,
    progress: bool = True,
) -> TrainHistory:
    """Train the model's trainable tensors on stage `run.index`; keep its best dev epoch."""
    model, heads, stage = run.model, run.heads, run.stage
    device = next(model.parameters()).device
    trainable = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
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
    total_steps = batch_count(len(stage.train), config.batch_size) * config.epochs
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, _linear_warmup(math.ceil(config.warmup_ratio * total_steps), total_steps)
    )
    generator = torch.Generator().manual_seed(config.seed + run.index)
    torch.manual_seed(config.seed + run.index)  # dropout masks
    history = TrainHistory(metric=PRIMARY_METRIC["single_label"])
    best = BestEpoch(trainable, history)
    step = 0
    bar = Progress(total_steps, unit="step", enabled=progress, lines=0)
    for epoch in range(1, config.epochs + 1):
        model.train()
        started, losses = time.perf_counter(), []
        bar.describe(f"stage {run.index + 1}/{len(run.stages)} {stage.name} epoch {epoch}")
        order = torch.randperm(len(stage.train), generator=generator).tolist()
        for start in range(0, len(order), config.batch_size):
            rows: list[Row] = [(run.index, i) for i in order[start : start + config.batch_size]]
            rows += strategy.replayed(run, len(rows), generator)
            loss = _batch_loss(run, strategy, rows, device)
            if not torch.isfinite(loss):
                bar.close()
                raise TrainingError(
                    f"loss became {loss.item()} in stage {stage.name}, epoch {epoch}, step "
                    f"{step + 1}; lower the learning rate (now {learning_rate:g})"
                )
            losses.append(apply_step(loss, optimizer, scheduler, trainable, config.max_grad_norm))
            step += 1
            bar.update()
            bar.show(loss=f"{losses[-1]:.4f}")
        heads.select(run.index)
        dev = evaluate(
            model,
            stage.encoder,
            stage.dev,
            "single_label",
            stage.label_names,
            config.eval_batch_size,
        )
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
        score = dev.metrics[history.metric]
        best.offer(epoch, score)
        bar.line()
    bar.close()
    best.restore()
    strategy.end(run)
    return history


def _batch_loss(
    run: StageRun, strategy: Strategy, rows: Sequence[Row], device: torch.device
) -> torch.Tensor:
    """Mean cross-entropy of every row under its own stage's head, plus the strategy's term."""
    heads = run.heads
    features = [run.stages[stage].train[index] for stage, index in rows]
    batch = {k: v.to(device) for k, v in run.stage.encoder.collate(features).items()}
    labels = batch.pop("labels")
    heads.collecting = True
    hidden = None
    try:
        if strategy.hidden_states:
            states = run.model(**batch, output_hidden_states=True).hidden_states
            hidden = HiddenStates(tuple(states), batch["attention_mask"])
        else:
            run.model(**batch)
        outputs = heads.outputs
    finally:
        heads.collecting, heads.outputs = False, []
    of_stage = torch.tensor([stage for stage, _ in rows], device=device)
    total = outputs[0].new_zeros(())
    for stage in sorted({stage for stage, _ in rows}):
        mask = of_stage == stage
        total = total + F.cross_entropy(outputs[stage][mask], labels[mask], reduction="sum")
    loss = total / len(rows)
    extra = strategy.penalty(run, rows, outputs, hidden)
    return loss if extra is None else loss + extra
