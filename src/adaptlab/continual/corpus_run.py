"""A language-modelling stage in training (`TextStageRun`): its tokenised documents
(`TextStage`), the next-token loss of a batch of them over their target tokens, chunked
(`adaptlab.engine.lm_loss`: the (tokens, vocabulary) logits are never made whole), what the
forward pass gives a strategy's penalty (the LM head's input rather than the logits), and
perplexity on held-out documents, whose dev value picks the stage's best epoch.

A document is a corpus's token ids, every token after the first a target (`causal-lm`), or an
encoded example that carries its own target mask (`sft`, `chat`: its labels, IGNORE_INDEX off
the answer's tokens; `adaptlab.data.generative_encoding`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn

from adaptlab.continual.stages import Row, RunningStage
from adaptlab.data.encoding import IGNORE_INDEX
from adaptlab.data.generative_encoding import EncodedExample
from adaptlab.engine.lm_head_capture import LmHeadInput, lm_head_input
from adaptlab.engine.lm_loss import next_token_loss
from adaptlab.engine.objective import DevScore
from adaptlab.engine.packing import Encoded, collate_padded
from adaptlab.finite import exp_or_inf
from adaptlab.parallel.shared_evaluation import gathered, my_turn

PERPLEXITY = "perplexity"

Document = tuple[int, ...]
"""A document's token ids, at most `max_length` of them."""

StageDocument = Document | Encoded
"""What a stage trains on: a document whose every token after the first is a target, or an
encoded example with its own labels (IGNORE_INDEX where a token is not a target)."""


@dataclass(frozen=True)
class TextStage:
    """One stage's corpus, tokenised: its name and documents per split."""

    name: str
    train: Sequence[StageDocument]
    dev: Sequence[StageDocument]
    test: Sequence[StageDocument]


@dataclass(frozen=True)
class TextStageRun(RunningStage[TextStage]):
    """Stage `index` about to be trained on every stage's documents, padded with `pad_id`."""

    pad_id: int

    @property
    def metric(self) -> str:
        return PERPLEXITY

    def forward(self, rows: Sequence[Row], hidden_states: bool) -> tuple[torch.Tensor, LmHeadInput]:
        """Mean next-token cross-entropy over the batch's target tokens, and what the LM head
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
        return sum(len(predicted(self.stages[stage].train[index])) for stage, index in rows)

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
    model: nn.Module, documents: Sequence[StageDocument], pad_id: int, batch_size: int
) -> Perplexity:
    """The model's perplexity on `documents`' target tokens (of a plain document, every token
    after its first)."""
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


def collate(documents: Sequence[StageDocument], pad_id: int) -> dict[str, torch.Tensor]:
    """Right-padded `input_ids`, `attention_mask`, and `labels` (a plain document's ids, an
    encoded example's labels; IGNORE_INDEX at pads)."""
    return collate_padded([as_example(document) for document in documents], pad_id)


def as_example(document: StageDocument) -> Encoded:
    """`document` with its labels: a plain document's are its ids."""
    return EncodedExample(document, document) if isinstance(document, tuple) else document


def predicted(document: StageDocument) -> list[int]:
    """The positions of `document` whose next token is a target (where its loss is taken)."""
    labels = as_example(document).labels
    return [position for position in range(len(labels) - 1) if labels[position + 1] != IGNORE_INDEX]
