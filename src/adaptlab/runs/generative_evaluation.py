"""How a generative model is scored on a split: the perplexity and next-token accuracy of its
target tokens (chunked, `adaptlab.engine.lm_loss`: the logits never exist whole), and, for the
tasks that generate, answers decoded in batches by the engine `adaptlab serve` uses
(`adaptlab.engine.generate`) and scored against the references
(`adaptlab.tasks.generation_metrics`). An encoder-decoder's batches, targets and answers are its
own (`adaptlab.runs.seq2seq_targets`, `adaptlab.engine.generate_seq2seq`), picked by its
config's `is_encoder_decoder`. In a multi-process run the batches are shared out and the
results gathered."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from transformers import PreTrainedTokenizerBase

from adaptlab.engine.generate import generate_batch
from adaptlab.engine.generate_seq2seq import generate_seq2seq
from adaptlab.engine.lm_head_capture import lm_head_input
from adaptlab.engine.lm_loss import TokenLoss, next_token_loss
from adaptlab.engine.packing import Encoded, collate_padded, target_tokens
from adaptlab.finite import exp_or_inf
from adaptlab.parallel.shared_evaluation import gathered, my_turn
from adaptlab.records.generated import Generated
from adaptlab.runs.seq2seq_targets import (
    collate_seq2seq,
    is_encoder_decoder,
    seq2seq_scores,
    target_count,
)
from adaptlab.tasks.generation_metrics import GENERATION_METRICS, generation_scores
from adaptlab.tasks.generative_facts import PERPLEXITY, TOKEN_ACCURACY
from adaptlab.tasks.generative_settings import GenerativeSettings
from adaptlab.tasks.task import Task


@dataclass(frozen=True)
class Answers:
    """What generation is scored on: each prompt's ids and text, and its reference answer."""

    prompts: Sequence[Sequence[int]]
    texts: Sequence[str]
    references: Sequence[str]


@dataclass(frozen=True)
class Generation:
    """How answers are generated and scored."""

    metrics: tuple[str, ...]
    max_new_tokens: int
    stop: tuple[str, ...]

    @classmethod
    def of(
        cls, settings: GenerativeSettings, metrics: tuple[str, ...] = GENERATION_METRICS
    ) -> Generation:
        """`metrics` on answers of at most `settings`' new tokens, cut at its stop strings."""
        return cls(metrics, settings.max_new_tokens, settings.stop)


@dataclass(frozen=True)
class AnswerScoring:
    """How a preference run scores dev: the metric judging an epoch, how answers are generated
    and how many examples a scoring batch holds."""

    metric: str
    generation: Generation
    batch_size: int

    @classmethod
    def of(cls, settings: GenerativeSettings, task: Task, batch_size: int) -> AnswerScoring:
        """The metric `settings` name (else the task's own) on answers `settings` generate."""
        return cls(settings.metric or task.primary_metric, Generation.of(settings), batch_size)

    def judged(self, scored: Scored) -> float:
        """The score the best epoch is chosen by (higher is better)."""
        if self.metric == PERPLEXITY:
            return -scored.metrics[PERPLEXITY]
        return scored.metrics[self.metric]


@dataclass(frozen=True)
class Scored:
    """A split scored: mean loss per target token, the metrics, the generated answers."""

    loss: float
    metrics: dict[str, float]
    generated: tuple[Generated, ...] = ()


@dataclass(frozen=True)
class GenerativeSplit:
    """A split to score: its encoded examples and, for a task that generates, its answers."""

    encoded: Sequence[Encoded]
    answers: Answers | None


def score_split(
    model: nn.Module,
    tokenizer: PreTrainedTokenizerBase,
    split: GenerativeSplit,
    generation: Generation | None,
    batch_size: int,
) -> Scored:
    """`split` scored by `model` (see the module docstring)."""
    was_training = model.training
    model.eval()
    try:
        loss, metrics = _target_scores(model, split.encoded, tokenizer.pad_token_id, batch_size)
        generated: tuple[Generated, ...] = ()
        if generation is not None and split.answers is not None:
            generated = _generated(model, tokenizer, split.answers, generation, batch_size)
            texts = [g.generation for g in generated]
            references = [g.reference for g in generated]
            metrics.update(generation_scores(texts, references, generation.metrics))
    finally:
        model.train(was_training)
    return Scored(loss, metrics, generated)


def padded_batch(
    model: nn.Module, examples: Sequence[Encoded], pad_id: int
) -> dict[str, torch.Tensor]:
    """`examples` one a row, right-padded: prompts and completions apart for an encoder-decoder
    (`collate_seq2seq`), one sequence each for a decoder (`collate_padded`)."""
    collate = collate_seq2seq if is_encoder_decoder(model) else collate_padded
    return collate(examples, pad_id)


def target_scores(model: nn.Module, batch: dict[str, torch.Tensor]) -> TokenLoss:
    """The scores of `batch`'s target tokens (its `labels`; its other keys are the model's
    inputs), chunked: the next tokens for a decoder, the decoder's labels for an
    encoder-decoder."""
    if is_encoder_decoder(model):
        return seq2seq_scores(model, batch)
    inputs = {k: v for k, v in batch.items() if k != "labels"}
    return next_token_loss(lm_head_input(model, **inputs), batch["labels"])


def target_terms(model: nn.Module, batch: dict[str, torch.Tensor]) -> int:
    """How many target tokens `target_scores` averages over."""
    return target_count(batch) if is_encoder_decoder(model) else target_tokens(batch)


def generate_answers(
    model: nn.Module,
    tokenizer: PreTrainedTokenizerBase,
    prompts: Sequence[Sequence[int]],
    *,
    max_new_tokens: int,
    stop: Sequence[str],
    batch_size: int,
) -> list[str]:
    """Greedy answers to `prompts`: an encoder-decoder's by `generate_seq2seq`, a decoder's by
    the serving engine (`generate_batch`)."""
    generate = generate_seq2seq if is_encoder_decoder(model) else generate_batch
    return generate(
        model, tokenizer, prompts, max_new_tokens=max_new_tokens, stop=stop, batch_size=batch_size
    )


@torch.no_grad()
def _target_scores(
    model: nn.Module, encoded: Sequence[Encoded], pad_id: int, batch_size: int
) -> tuple[float, dict[str, float]]:
    device = next(model.parameters()).device
    mine: list[tuple[int, tuple[float, int, int]]] = []
    for number, start in enumerate(range(0, len(encoded), batch_size)):
        if not my_turn(number):  # batches split over a multi-process run's processes
            continue
        part = padded_batch(model, encoded[start : start + batch_size], pad_id)
        scores = target_scores(model, {k: v.to(device) for k, v in part.items()})
        mine.append((number, (scores.total.item(), int(scores.correct), int(scores.count))))
    every = gathered(mine)
    total, correct, count = (sum(s[i] for s in every) for i in range(3))
    loss = total / count
    return loss, {PERPLEXITY: exp_or_inf(loss), TOKEN_ACCURACY: correct / count}


def _generated(
    model: nn.Module,
    tokenizer: PreTrainedTokenizerBase,
    answers: Answers,
    generation: Generation,
    batch_size: int,
) -> tuple[Generated, ...]:
    mine: list[tuple[int, list[str]]] = []
    for number, start in enumerate(range(0, len(answers.prompts), batch_size)):
        if my_turn(number):
            texts = generate_answers(
                model,
                tokenizer,
                answers.prompts[start : start + batch_size],
                max_new_tokens=generation.max_new_tokens,
                stop=generation.stop,
                batch_size=batch_size,
            )
            mine.append((number, texts))
    every: list[Any] = [text for texts in gathered(mine) for text in texts]
    return tuple(
        Generated(prompt, text, reference)
        for prompt, text, reference in zip(answers.texts, every, answers.references, strict=True)
    )
