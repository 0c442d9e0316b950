"""Predictions for raw texts from a trained model: label and probability, batched."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import torch
from torch import nn

from adaptlab.data import Example, TextEncoder
from adaptlab.tasks import TaskKind
from adaptlab.train.batches import batches

IGNORE_INDEX = -100


@dataclass
class Prediction:
    """One input's prediction; `words` is set for token tasks (one tag per word)."""

    text: str
    label: Any
    probability: float | list[float] | None
    words: list[str] | None = None

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (`adaptlab predict --jsonl`, the server): fields that are set."""
        return {k: v for k, v in asdict(self).items() if v is not None}


def placeholder_example(text: str, task: TaskKind) -> Example:
    """An unlabelled input as an Example; token tasks split the text on whitespace."""
    if task == "token":
        words = tuple(text.split())
        return Example(text=words, label=(0,) * len(words))
    label: Any = {"single_label": 0, "multi_label": (), "regression": 0.0}[task]
    return Example(text=text, label=label)


@torch.no_grad()
def predict(
    model: nn.Module,
    encoder: TextEncoder,
    texts: Sequence[str],
    task: TaskKind,
    label_names: Sequence[str],
    batch_size: int = 64,
) -> list[Prediction]:
    """Label each text: the argmax class with its probability, labels above 0.5 for
    multi-label, the value for regression, one tag per word for token tasks."""
    model.eval()
    device = next(model.parameters()).device
    features = encoder.encode([placeholder_example(t, task) for t in texts])
    predictions: list[Prediction] = []
    offset = 0
    for batch in batches(encoder, features, batch_size, device):
        marks = batch.pop("labels")
        logits = model(**batch).logits.float()
        for row in range(logits.shape[0]):
            text = texts[offset + row]
            predictions.append(_one(text, logits[row], marks[row], task, label_names))
        offset += logits.shape[0]
    return predictions


def _one(
    text: str, logits: torch.Tensor, marks: torch.Tensor, task: TaskKind, label_names: Sequence[str]
) -> Prediction:
    if task == "single_label":
        probs = logits.softmax(-1)
        best = int(probs.argmax())
        return Prediction(text, label_names[best], float(probs[best]))
    if task == "multi_label":
        probs = logits.sigmoid()
        chosen = [label_names[i] for i in range(len(probs)) if probs[i] > 0.5]
        return Prediction(text, chosen, [round(float(p), 6) for p in probs])
    if task == "regression":
        return Prediction(text, float(logits.reshape(-1)[0]), None)
    first_pieces = logits[marks != IGNORE_INDEX].softmax(-1)
    words = text.split()[: len(first_pieces)]
    tags = [label_names[int(i)] for i in first_pieces.argmax(-1)]
    return Prediction(text, tags, [float(p) for p in first_pieces.max(-1).values], words=words)
