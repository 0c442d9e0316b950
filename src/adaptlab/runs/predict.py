"""Predictions for raw texts from a trained model of a labelled task, batched: what each task
makes of an input's outputs (`Task.prediction`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch
from torch import nn

from adaptlab.engine.batches import batches
from adaptlab.tasks.prediction import Prediction
from adaptlab.tasks.registry import get_task

if TYPE_CHECKING:
    from adaptlab.data.encoding import TextEncoder


@torch.no_grad()
def predict(
    model: nn.Module,
    encoder: TextEncoder,
    texts: Sequence[str],
    task: str,
    label_names: Sequence[str],
    batch_size: int = 64,
) -> list[Prediction]:
    """Label each text as `task` does (the argmax class with its probability, labels above 0.5
    for multi-label, the value for regression, a reward model's score, one tag per word for
    token tasks)."""
    chosen = get_task(task)
    model.eval()
    device = next(model.parameters()).device
    eos = encoder.tokenizer.eos_token
    features = encoder.encode([chosen.placeholder(chosen.input_text(t, eos)) for t in texts])
    predictions: list[Prediction] = []
    offset = 0
    for batch in batches(encoder, features, batch_size, device):
        marks = batch.pop("labels")
        logits = model(**batch).logits.float()
        for row in range(logits.shape[0]):
            text = texts[offset + row]
            predictions.append(chosen.prediction(text, logits[row], marks[row], label_names))
        offset += logits.shape[0]
    return predictions
