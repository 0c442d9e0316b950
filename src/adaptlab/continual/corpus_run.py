"""A causal-LM stage in training (`TextStageRun`): its tokenised corpus (`TextStage`), the
next-token loss of a batch of documents, chunked (`adaptlab.engine.lm_loss`: the (tokens,
vocabulary) logits are never made whole), what the forward pass gives a strategy's penalty (the
LM head's input rather than the logits), and perplexity on held-out documents, whose dev value
picks the stage's best epoch."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn

from adaptlab.continual.stages import Row, RunningStage
from adaptlab.data.encoding import IGNORE_INDEX
from adaptlab.engine.lm_head_capture import LmHeadInput, lm_head_input
from adaptlab.engine.lm_loss import next_token_loss
from adaptlab.engine.objective import DevScore
from adaptlab.finite import exp_or_inf
from adaptlab.parallel.shared_evaluation import gathered, my_turn

PERPLEXITY = "perplexity"

Document = tuple[int, ...]
"""A document's token ids, at most `max_length` of them."""


@dataclass(frozen=True)
class TextStage:
    """One stage's corpus, tokenised: its name and documents per split."""

    name: str
    train: Sequence[Document]
    dev: Sequence[Document]
    test: Sequence[Document]


@dataclass(frozen=True)
class TextStageRun(RunningStage[TextStage]):
    """Stage `index` about to be trained on every stage's documents, padded with `pad_id`."""

    pad_id: int

    @property
    def metric(self) -> str:
        return PERPLEXITY

    def forward(self, rows: Sequence[Row], hidden_states: bool) -> tuple[torch.Tensor, LmHeadInput]:
        """Mean next-token cross-entropy over every token of the batch, and what the LM head
        read (its hidden states are the last layer's whether `hidden_states` asks or not)."""
        device = next(self.model.parameters()).device
        batch = collate([self.stages[stage].train[index] for stage, index in rows], self.pad_id)
        head = lm_head_input(
            self.model,
            input_ids=batch["input_ids"].to(device),
            attention_mask=batch["attention_mask"].to(device),
        )
        return next_token_loss(head, batch["labels"].to(device)).mean(), head

    def loss_terms(self, rows: Sequence[Row]) -> int:
        """The next tokens the loss is the mean over."""
        return sum(len(self.stages[stage].train[index]) - 1 for stage, index in rows)

    def dev(self) -> DevScore:
        """Dev perplexity; the best epoch is the one of lowest dev loss."""
        tested = perplexity(self.model, self.stage.dev, self.pad_id, self.eval_batch_size)
        return DevScore(tested.loss, tested.metrics(), -tested.loss)


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


def collate(documents: Sequence[Document], pad_id: int) -> dict[str, torch.Tensor]:
    """Right-padded `input_ids`, `attention_mask`, and `labels` (the ids, IGNORE_INDEX at pads)."""
    width = max(len(doc) for doc in documents)
    ids = torch.full((len(documents), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(documents), width), dtype=torch.long)
    for row, doc in enumerate(documents):
        ids[row, : len(doc)] = torch.tensor(doc)
        mask[row, : len(doc)] = 1
    labels = ids.masked_fill(mask == 0, IGNORE_INDEX)
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}
