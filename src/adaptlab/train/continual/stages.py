"""The records a sequence's stages share: each stage's encoded data, and the stage in training."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from torch import nn

from adaptlab.data import TextEncoder
from adaptlab.train.continual.heads import StageHeads

Row = tuple[int, int]
"""A training example of the sequence: (stage, index into that stage's training features)."""


@dataclass(frozen=True)
class StageData:
    """One stage's data set, encoded: its name, label names and features per split."""

    name: str
    label_names: tuple[str, ...]
    encoder: TextEncoder
    train: Sequence[dict[str, Any]]
    dev: Sequence[dict[str, Any]]
    test: Sequence[dict[str, Any]]


@dataclass(frozen=True)
class StageRun:
    """Stage `index` about to be trained: the model with its heads, and every stage's data."""

    model: nn.Module
    heads: StageHeads
    stages: Sequence[StageData]
    index: int
    seed: int
    eval_batch_size: int

    @property
    def stage(self) -> StageData:
        return self.stages[self.index]
