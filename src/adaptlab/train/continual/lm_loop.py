"""Training and testing of one causal-LM stage in the epoch loop (`adaptlab.train.loop`):
next-token cross-entropy over the batch's tokens with the strategy's replayed documents and
penalty, the epoch of lowest dev perplexity kept; and perplexity on held-out documents. The
loss is chunked (`adaptlab.train.lm_loss`): the (tokens, vocabulary) logits are never made whole,
and the strategy's penalty gets the head's input rather than the logits."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn

from adaptlab.finite import exp_or_inf
from adaptlab.train.config import TrainConfig
from adaptlab.train.continual.lm_stages import Document, TextStageRun, collate
from adaptlab.train.continual.lm_strategy import TextStrategy
from adaptlab.train.continual.stage_objective import StageObjective
from adaptlab.train.continual.stages import Row
from adaptlab.train.history import TrainHistory
from adaptlab.train.lm_head_capture import lm_head_input
from adaptlab.train.lm_loss import next_token_loss
from adaptlab.train.objective import DevScore
from adaptlab.train.shared_evaluation import gathered, my_turn

PERPLEXITY = "perplexity"


@dataclass(frozen=True)
class Perplexity:
    """Mean negative log-likelihood per predicted token, its exponential, and the token count."""

    loss: float
    perplexity: float
    tokens: int

    def metrics(self) -> dict[str, float]:
        return {PERPLEXITY: self.perplexity, "tokens": float(self.tokens)}


@torch.no_grad()
def perplexity(
    model: nn.Module, documents: Sequence[Document], pad_id: int, batch_size: int
) -> Perplexity:
    """The model's perplexity on `documents` (every token after each document's first)."""
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    mine = []
    try:
        for number, start in enumerate(range(0, len(documents), batch_size)):
            if not my_turn(number):  # batches split over a multi-process run's processes
                continue
            batch = collate(documents[start : start + batch_size], pad_id)
            head = lm_head_input(
                model,
                input_ids=batch["input_ids"].to(device),
                attention_mask=batch["attention_mask"].to(device),
            )
            scores = next_token_loss(head, batch["labels"].to(device))
            mine.append((number, (scores.total.item(), int(scores.count))))
    finally:
        model.train(was_training)
    every = gathered(mine)
    total, tokens = sum(s[0] for s in every), sum(s[1] for s in every)
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
        head = lm_head_input(
            run.model,
            input_ids=batch["input_ids"].to(device),
            attention_mask=batch["attention_mask"].to(device),
        )
        loss = next_token_loss(head, batch["labels"].to(device)).mean()
        extra = self.strategy.penalty(run, rows, head)
        return loss if extra is None else loss + extra

    def loss_terms(self, rows: list[Row]) -> int:
        """The next tokens the loss is the mean over (for data-parallel shares)."""
        return sum(len(self.run.stages[stage].train[index]) - 1 for stage, index in rows)

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
