"""Each example's mean next-token negative log-likelihood over its target tokens (labels other
than IGNORE_INDEX), and the share of them that are the model's most likely next token: the
values a text or data probe compares item by item."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn
from transformers import PreTrainedTokenizerBase

from adaptlab.data.encoding import IGNORE_INDEX
from adaptlab.engine.packing import Encoded, collate_padded
from adaptlab.errors import DataError
from adaptlab.progress import track


@dataclass(frozen=True)
class TokenScores:
    """One example's mean target-token NLL (nats), token accuracy and target-token count."""

    nll: float
    accuracy: float
    tokens: int


@torch.no_grad()
def token_scores(
    model: nn.Module,
    tokenizer: PreTrainedTokenizerBase,
    examples: Sequence[Encoded],
    *,
    batch_size: int = 8,
    progress: bool = False,
    desc: str = "scoring",
) -> list[TokenScores]:
    """The scores of every example, in order; an example without a target token is refused."""
    for index, example in enumerate(examples):
        if not any(label != IGNORE_INDEX for label in example.labels[1:]):
            raise DataError(f"{desc}: example {index} has no target token to score")
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    scores: list[TokenScores] = []
    try:
        starts = range(0, len(examples), batch_size)
        for start in track(starts, desc, "batch", enabled=progress):
            batch = collate_padded(examples[start : start + batch_size], pad)
            logits = model(
                input_ids=batch["input_ids"].to(device),
                attention_mask=batch["attention_mask"].to(device),
            ).logits.float()
            targets = batch["labels"][:, 1:].to(device)
            kept = targets.ne(IGNORE_INDEX)
            log_probs = logits[:, :-1].log_softmax(-1)
            picked = log_probs.gather(-1, targets.clamp(min=0).unsqueeze(-1)).squeeze(-1)
            right = log_probs.argmax(-1).eq(targets) & kept
            counts = kept.sum(-1)
            nll = -(picked * kept).sum(-1) / counts
            accuracy = right.sum(-1) / counts
            scores += [
                TokenScores(float(n), float(a), int(c))
                for n, a, c in zip(nll.tolist(), accuracy.tolist(), counts.tolist(), strict=True)
            ]
    finally:
        model.train(was_training)
    return scores
