"""Masked-language-model training on unlabelled text: how a language adapter is made.

MAD-X (Pfeiffer et al. 2020; the AdapterHub slides' Quechua example): a language adapter is
trained with the masked-LM objective on a language's unlabelled text, the model frozen; a
task adapter is then trained stacked on the source language's adapter (frozen), and at test
time the target language's adapter takes its place. Masking is BERT's
(`adaptlab.data.masking`). A model without a masked-LM head (a sentence encoder such as e5)
gets transformers' head for its architecture, newly initialised and tied to the word
embeddings: its transform and LayerNorm train with the adapter and are saved with it.

Only the masked positions reach the head: a forward hook on the base model keeps their
hidden states alone, so the vocabulary-sized output (250,037 words for XLM-R's) is computed
for 15% of the tokens instead of all of them, and even those logits are made a chunk of
positions at a time and never all at once (`adaptlab.engine.lm_loss`).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from adaptlab.data.encoding import IGNORE_INDEX
from adaptlab.data.masking import MaskedLmEncoder
from adaptlab.engine.lm_head_capture import lm_head_input
from adaptlab.engine.lm_loss import TokenLoss, linear_cross_entropy
from adaptlab.engine.objective import DevScore, TensorBatch
from adaptlab.errors import ConfigError
from adaptlab.parallel.shared_evaluation import gathered, my_turn

MLM_METRIC = "masked_accuracy"
"""Share of masked tokens predicted exactly; it picks the best epoch on dev (the task `mlm`'s
primary metric)."""
EVAL_MASK_SEED = 12345
"""Dev and test masks are drawn from this seed, the same every epoch and every run."""


@dataclass(frozen=True)
class MlmEvaluation:
    """Mean loss per masked token, and the metrics (masked accuracy, perplexity)."""

    loss: float
    metrics: dict[str, float]


@contextmanager
def hidden_states_at(model: nn.Module, chosen: torch.Tensor) -> Iterator[None]:
    """While inside, the base model hands the LM head only its hidden states at `chosen`
    (a boolean (batch, length) mask), as one sequence: (1, positions, hidden)."""
    prefix = getattr(model, "base_model_prefix", "")
    base = getattr(model, prefix, None) if prefix else None
    if not isinstance(base, nn.Module):
        raise ConfigError(f"{type(model).__name__} has no base model under an LM head")

    def keep_chosen(module: nn.Module, args: tuple[Any, ...], output: Any) -> Any:
        picked = output[0][chosen].unsqueeze(0)
        if isinstance(output, tuple):
            return (picked, *output[1:])
        output.last_hidden_state = picked
        return output

    hook = base.register_forward_hook(keep_chosen)
    try:
        yield
    finally:
        hook.remove()


def masked_lm_scores(model: nn.Module, batch: TensorBatch) -> TokenLoss:
    """Cross-entropy summed over the masked tokens, how many were predicted right, how many
    there are; the head reads the masked positions only and its logits are made in chunks."""
    labels = batch["labels"]
    chosen = labels.ne(IGNORE_INDEX)
    with hidden_states_at(model, chosen):
        head = lm_head_input(model, **{k: v for k, v in batch.items() if k != "labels"})
    targets = labels[chosen]
    if head.hidden.shape[:-1] != (1, len(targets)):
        raise ConfigError(
            f"{type(model).__name__}: its LM head did not read the base model's output"
        )
    return linear_cross_entropy(head.hidden[0], head.weight, head.bias, targets)


def masked_lm_loss(model: nn.Module, batch: TensorBatch) -> torch.Tensor:
    """Mean cross-entropy over the masked tokens (`labels` other than IGNORE_INDEX)."""
    return masked_lm_scores(model, batch).mean()


def masked_batch(
    encoder: MaskedLmEncoder,
    features: Sequence[dict[str, Any]],
    indices: Sequence[int],
    generator: torch.Generator,
    device: torch.device,
) -> TensorBatch:
    """The examples `indices` of `features`, padded and masked with draws from `generator`."""
    batch = encoder.collate([features[i] for i in indices], generator)
    return {k: v.to(device) for k, v in batch.items()}


@torch.no_grad()
def evaluate_mlm(
    model: nn.Module,
    encoder: MaskedLmEncoder,
    features: Sequence[dict[str, Any]],
    batch_size: int = 64,
) -> MlmEvaluation:
    """Masked-token loss, accuracy and perplexity, with the fixed evaluation masks."""
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    generator = torch.Generator().manual_seed(EVAL_MASK_SEED)
    mine = []
    for number, start in enumerate(range(0, len(features), batch_size)):
        indices = range(start, min(start + batch_size, len(features)))
        batch = masked_batch(encoder, features, indices, generator, device)  # masks drawn in order
        if my_turn(number):  # batches split over a multi-process run's processes
            scores = masked_lm_scores(model, batch)
            mine.append((number, (float(scores.total), int(scores.correct), int(scores.count))))
    model.train(was_training)
    every = gathered(mine)
    total_loss = sum(s[0] for s in every)
    correct, count = sum(s[1] for s in every), sum(s[2] for s in every)
    mean = total_loss / count
    return MlmEvaluation(mean, {MLM_METRIC: correct / count, "perplexity": math.exp(mean)})


class MaskedLm:
    """Train on `train`'s masked tokens (fresh masks every epoch), score each epoch on `dev`
    with the fixed evaluation masks; the best epoch by masked accuracy (`Objective`)."""

    title = ""
    metric = MLM_METRIC

    def __init__(
        self,
        model: nn.Module,
        encoder: MaskedLmEncoder,
        train: Sequence[dict[str, Any]],
        dev: Sequence[dict[str, Any]],
        eval_batch_size: int,
    ) -> None:
        self.model, self.encoder = model, encoder
        self.train_features, self.dev_features = train, dev
        self.eval_batch_size = eval_batch_size
        self.examples = len(train)
        self.device = next(model.parameters()).device

    def batch(self, indices: list[int], generator: torch.Generator) -> TensorBatch:
        return masked_batch(self.encoder, self.train_features, indices, generator, self.device)

    def loss(self, batch: TensorBatch) -> torch.Tensor:
        return masked_lm_loss(self.model, batch)

    def loss_terms(self, batch: TensorBatch) -> int:
        """The masked tokens the loss is the mean over (for data-parallel shares)."""
        return int(batch["labels"].ne(IGNORE_INDEX).sum())

    def dev(self) -> DevScore:
        tested = evaluate_mlm(self.model, self.encoder, self.dev_features, self.eval_batch_size)
        return DevScore(tested.loss, tested.metrics, tested.metrics[MLM_METRIC])
