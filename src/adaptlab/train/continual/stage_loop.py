"""Training of one classification stage of a sequence (`stage_epochs.train_epochs`), each
example scored by its own stage's head, the strategy's penalty added, the best epoch chosen by
dev accuracy, and the strategy's `end` called once the best epoch's weights are back."""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F

from adaptlab.train.config import TrainConfig
from adaptlab.train.continual.stage_epochs import DevScore, StageTraining, train_epochs
from adaptlab.train.continual.stages import HiddenStates, Row, StageRun
from adaptlab.train.continual.strategy import Strategy
from adaptlab.train.evaluate import evaluate
from adaptlab.train.loop import TrainHistory
from adaptlab.train.metrics import PRIMARY_METRIC


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
    metric = PRIMARY_METRIC["single_label"]

    def dev() -> DevScore:
        heads.select(run.index)
        tested = evaluate(
            model,
            stage.encoder,
            stage.dev,
            "single_label",
            stage.label_names,
            config.eval_batch_size,
        )
        return DevScore(tested.loss, tested.metrics, tested.metrics[metric])

    training = StageTraining(
        name=stage.name,
        index=run.index,
        stages=len(run.stages),
        examples=len(stage.train),
        metric=metric,
        batch_loss=lambda rows: _batch_loss(run, strategy, rows, device),
        replayed=lambda rows, generator: strategy.replayed(run, rows, generator),
        dev=dev,
    )
    history = train_epochs(model, training, config, learning_rate, progress=progress)
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
