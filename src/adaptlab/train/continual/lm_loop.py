"""Training and testing of one causal-LM stage in the epoch loop (`adaptlab.train.loop`):
next-token cross-entropy over the batch's tokens with the strategy's replayed documents and
penalty, the epoch of lowest dev perplexity kept; and perplexity on held-out documents."""

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
from adaptlab.train.continual.stage_objective import StageObjective
from adaptlab.train.continual.stages import Row
from adaptlab.train.history import TrainHistory
from adaptlab.train.objective import DevScore

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


class CorpusStage(StageObjective[TextStageRun, TextStrategy]):
    """Stage `run.index` of a causal-LM sequence as an `Objective`."""

    metric = PERPLEXITY

    def loss(self, rows: list[Row]) -> torch.Tensor:
        """Mean next-token cross-entropy over every token of the batch, plus the strategy's
        term."""
        run, device = self.run, self.device
        batch = collate([run.stages[stage].train[index] for stage, index in rows], run.pad_id)
        logits = run.model(
            input_ids=batch["input_ids"].to(device),
            attention_mask=batch["attention_mask"].to(device),
        ).logits
        loss = next_token_loss(logits, batch["labels"].to(device), "mean")
        extra = self.strategy.penalty(run, rows, logits)
        return loss if extra is None else loss + extra

    def dev(self) -> DevScore:
        """Dev perplexity; the best epoch is the one of lowest dev loss."""
        tested = perplexity(
            self.run.model, self.run.stage.dev, self.run.pad_id, self.eval_batch_size
        )
        return DevScore(tested.loss, tested.metrics(), -tested.loss)


def train_text_stage(
    run: TextStageRun,
    strategy: TextStrategy,
    config: TrainConfig,
    learning_rate: float,
    *,
    progress: bool = True,
) -> TrainHistory:
    """Train the model's trainable tensors on corpus `run.index`; keep its best dev epoch."""
    objective = CorpusStage(run, strategy, config.eval_batch_size)
    return objective.train(config, learning_rate, progress)
