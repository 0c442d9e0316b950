"""Evaluate a model of a labelled task on encoded examples: loss, the task's metrics, and the
raw outputs (for per-class counts)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

import adaptlab.checks as checks
from adaptlab.data.encoding import TextEncoder
from adaptlab.engine.batches import collated
from adaptlab.parallel.shared_evaluation import gathered, my_turn
from adaptlab.tasks.registry import get_task


@dataclass
class Evaluation:
    """Mean loss, metrics, and per-example outputs (logits; token rows padded with -100 labels)."""

    loss: float
    metrics: dict[str, float]
    outputs: np.ndarray
    labels: np.ndarray


@torch.no_grad()
def evaluate(
    model: nn.Module,
    encoder: TextEncoder,
    features: Sequence[dict[str, Any]],
    task: str,
    label_names: Sequence[str],
    batch_size: int = 64,
) -> Evaluation:
    """Run `model` over `features` in eval mode and score it (its batches split over the
    processes of a multi-process run, `adaptlab.parallel.shared_evaluation`)."""
    checks.positive(batch_size, "batch size")
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    mine = []
    for number, start in enumerate(range(0, len(features), batch_size)):
        if not my_turn(number):  # another process of the run scores it
            continue
        indices = range(start, min(start + batch_size, len(features)))
        batch = collated(encoder, features, indices, device)
        result = model(**batch)
        scored = (
            float(result.loss),
            len(batch["input_ids"]),
            result.logits.float().cpu().numpy(),
            batch["labels"].cpu().numpy(),
        )
        mine.append((number, scored))
    model.train(was_training)
    every = gathered(mine)
    losses, weights = [s[0] for s in every], [s[1] for s in every]
    outputs, labels = [s[2] for s in every], [s[3] for s in every]
    if get_task(task).word_level:
        outputs, labels = _pad_rows(outputs, -1e9), _pad_rows(labels, -100)
    all_outputs, all_labels = np.concatenate(outputs), np.concatenate(labels)
    return Evaluation(
        loss=float(np.average(losses, weights=weights)),
        metrics=get_task(task).scores(all_outputs, all_labels, label_names),
        outputs=all_outputs,
        labels=all_labels,
    )


def _pad_rows(arrays: list[np.ndarray], fill: float) -> list[np.ndarray]:
    """Pad batches of (batch, length, ...) to one length so they concatenate."""
    length = max(a.shape[1] for a in arrays)
    padded = []
    for a in arrays:
        widths = [(0, 0), (0, length - a.shape[1])] + [(0, 0)] * (a.ndim - 2)
        padded.append(np.pad(a, widths, constant_values=fill))
    return padded
