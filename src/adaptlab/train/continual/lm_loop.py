"""Training and testing of one causal-LM stage (`stage_epochs.train_epochs`): next-token
cross-entropy over the batch's tokens with the strategy's replayed documents and penalty, the
epoch of lowest dev perplexity kept; and perplexity on held-out documents."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from adaptlab.data.encoding import IGNORE_INDEX
from adaptlab.finite import exp_or_inf
from adaptlab.train.config import TrainConfig
from adaptlab.train.continual.lm_stages import Document, TextStageRun, collate
from adaptlab.train.continual.lm_strategy import TextStrategy
from adaptlab.train.continual.stage_epochs import DevScore, StageTraining, train_epochs
from adaptlab.train.continual.stages import Row
from adaptlab.train.loop import TrainHistory

PERPLEXITY = "perplexity"


@dataclass(frozen=True)
class Perplexity:
    """Mean negative log-likelihood per predicted token, its exponential, and the token count."""

    loss: float
    perplexity: float
    tokens: int

    def metrics(self) -> dict[str, float]:
        return {PERPLEXITY: self.perplexity, "tokens": float(self.tokens)}


def next_token_loss(logits: torch.Tensor, labels: torch.Tensor, reduction: str) -> torch.Tensor:
    """Cross-entropy of each position's logits against the next token (pads ignored)."""
    return F.cross_entropy(
        logits[:, :-1].flatten(0, 1).float(),
        labels[:, 1:].flatten(),
        ignore_index=IGNORE_INDEX,
        reduction=reduction,
    )


@torch.no_grad()
def perplexity(
    model: nn.Module, documents: Sequence[Document], pad_id: int, batch_size: int
) -> Perplexity:
    """The model's perplexity on `documents` (every token after each document's first)."""
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    total, tokens = 0.0, 0
    try:
        for start in range(0, len(documents), batch_size):
            batch = collate(documents[start : start + batch_size], pad_id)
            logits = model(
                input_ids=batch["input_ids"].to(device),
                attention_mask=batch["attention_mask"].to(device),
            ).logits
            total += next_token_loss(logits, batch["labels"].to(device), "sum").item()
            tokens += int((batch["labels"][:, 1:] != IGNORE_INDEX).sum())
    finally:
        model.train(was_training)
    loss = total / tokens
    return Perplexity(loss, exp_or_inf(loss), tokens)


def train_text_stage(
    run: TextStageRun,
    strategy: TextStrategy,
    config: TrainConfig,
    learning_rate: float,
    *,
    progress: bool = True,
) -> TrainHistory:
    """Train the model's trainable tensors on corpus `run.index`; keep its best dev epoch."""
    model, stage = run.model, run.stage
    device = next(model.parameters()).device

    def dev() -> DevScore:
        tested = perplexity(model, stage.dev, run.pad_id, config.eval_batch_size)
        return DevScore(tested.loss, tested.metrics(), -tested.loss)

    training = StageTraining(
        name=stage.name,
        index=run.index,
        stages=len(run.stages),
        examples=len(stage.train),
        metric=PERPLEXITY,
        batch_loss=lambda rows: _batch_loss(run, strategy, rows, device),
        replayed=lambda rows, generator: strategy.replayed(run, rows, generator),
        dev=dev,
    )
    return train_epochs(model, training, config, learning_rate, progress=progress)


def _batch_loss(
    run: TextStageRun, strategy: TextStrategy, rows: Sequence[Row], device: torch.device
) -> torch.Tensor:
    """Mean next-token cross-entropy over every token of the batch, plus the strategy's term."""
    batch = collate([run.stages[stage].train[index] for stage, index in rows], run.pad_id)
    logits = run.model(
        input_ids=batch["input_ids"].to(device),
        attention_mask=batch["attention_mask"].to(device),
    ).logits
    loss = next_token_loss(logits, batch["labels"].to(device), "mean")
    extra = strategy.penalty(run, rows, logits)
    return loss if extra is None else loss + extra
