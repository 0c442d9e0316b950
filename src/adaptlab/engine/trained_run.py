"""What a run hands an analysis once it has trained (`adaptlab.engine.run.execute`'s
`on_trained`): the model and the labelled data it trained on; and the callback scoring a
language model's run with lm-evaluation-harness (`on_trained_lm`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from torch import nn

from adaptlab.data.encoding import TextEncoder
from adaptlab.data.types import Dataset
from adaptlab.records.harness import HarnessScores


@dataclass(frozen=True)
class TrainedRun:
    """What `execute` hands its `on_trained` callback before the model is released: the model at
    its best epoch, still adapted (so `adaptlab.disabled` gives its base and the handle keeps
    the starting weights), and the run's data set with every split encoded."""

    model: nn.Module
    encoder: TextEncoder
    dataset: Dataset
    features: Mapping[str, Sequence[dict[str, Any]]]


OnTrained = Callable[[TrainedRun], Mapping[str, Any]]
"""A callback whose JSON-ready result is stored as the result's `analysis`."""

OnTrainedLm = Callable[[nn.Module], HarnessScores]
"""A callback scoring a language-model run's trained model (at its best epoch, still adapted)
with lm-evaluation-harness; its scores are stored as the result's `harness`."""
