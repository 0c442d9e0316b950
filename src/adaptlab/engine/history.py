"""What the epoch loop keeps of a training: a record per epoch, and the best epoch's weights."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
from torch import nn

from adaptlab.records.result import EpochRecord


@dataclass
class TrainHistory:
    """Per-epoch records and the best epoch (by the objective's dev score)."""

    metric: str
    epochs: list[EpochRecord] = field(default_factory=list)
    best_epoch: int = 0

    @property
    def best(self) -> EpochRecord:
        return self.epochs[self.best_epoch - 1]


class BestEpoch:
    """The trainable tensors of the best dev epoch so far, put back when training ends."""

    def __init__(self, trainable: Sequence[tuple[str, nn.Parameter]], history: TrainHistory):
        self.trainable, self.history = trainable, history
        self.score = -math.inf
        self.state: dict[str, torch.Tensor] | None = None

    def offer(self, epoch: int, score: float) -> None:
        """Keep the tensors as they are now if `score` beats every earlier epoch's."""
        if score > self.score:
            self.score, self.history.best_epoch = score, epoch
            self.state = {n: p.detach().clone() for n, p in self.trainable}

    @torch.no_grad()
    def restore(self) -> None:
        """Put the best epoch's tensors back in place."""
        assert self.state is not None
        for name, param in self.trainable:
            param.copy_(self.state[name])
