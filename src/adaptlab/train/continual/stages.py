"""The records a sequence's stages share: each stage's encoded data, and the stage in training;
and what every kind of stage (labelled data set, corpus) has, whatever its examples are."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import torch
from torch import nn

from adaptlab.data import TextEncoder
from adaptlab.methods import add_adapter, list_adapters, train_adapter
from adaptlab.methods.config import MethodConfig
from adaptlab.train.continual.heads import StageHeads

Row = tuple[int, int]
"""A training example of the sequence: (stage, index into that stage's training features)."""


class StageSplits(Protocol):
    """A stage's name and its train, dev and test examples, however encoded."""

    @property
    def name(self) -> str: ...

    @property
    def train(self) -> Sequence[Any]: ...

    @property
    def dev(self) -> Sequence[Any]: ...

    @property
    def test(self) -> Sequence[Any]: ...


class StageInTraining(Protocol):
    """Stage `index` of `stages` about to be trained on `model` (`StageRun`, `TextStageRun`)."""

    @property
    def model(self) -> nn.Module: ...

    @property
    def stages(self) -> Sequence[StageSplits]: ...

    @property
    def index(self) -> int: ...


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


@dataclass(frozen=True)
class HiddenStates:
    """The student's hidden states for one batch: a (rows, tokens, width) tensor per layer,
    the embedding output first (as transformers returns them), and the batch's attention mask."""

    layers: tuple[torch.Tensor, ...]
    mask: torch.Tensor


def own_rows(run: StageRun, rows: Sequence[Row]) -> tuple[list[int], list[int]]:
    """The positions in `rows` of the training stage's own examples (not replayed ones), and
    their indices into its training set."""
    positions = [position for position, (stage, _) in enumerate(rows) if stage == run.index]
    return positions, [rows[position][1] for position in positions]


def use_stage_adapter(
    model: nn.Module, name: str, methods: Sequence[MethodConfig], seed: int
) -> None:
    """Add adapter `name` of `methods` (if new, initialised from `seed`) and make it the one
    that trains."""
    if name not in list_adapters(model):
        add_adapter(model, name, methods, train_head=False, seed=seed)
    train_adapter(model, name)
