"""What the epoch loop keeps of a training: a record per epoch, and the best epoch's weights.

The best epoch is the one with the best dev score (the objective's, higher is better). Scores
that tie (`adaptlab.tasks.judging.scores_tie`: equal up to float noise, as exact match on a
small dev set often is) are told apart by the dev loss, the lower one best; when that ties too,
or either loss is not a number, the earlier epoch stays."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
from torch import nn

from adaptlab.engine.objective import DevScore
from adaptlab.records.result import EpochRecord
from adaptlab.tasks.judging import scores_tie


@dataclass
class TrainHistory:
    """Per-epoch records and the best epoch (by the objective's dev score, ties by dev loss)."""

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

    def offer(self, epoch: int, dev: DevScore) -> None:
        """Keep the tensors as they are now if `dev` is better than every earlier epoch's."""
        if self._better(dev):
            self.score, self.history.best_epoch = dev.score, epoch
            self.state = {n: p.detach().clone() for n, p in self.trainable}

    def _better(self, dev: DevScore) -> bool:
        """A higher score, or a tied one with a lower dev loss than the best epoch's."""
        if self.history.best_epoch and scores_tie(dev.score, self.score):
            return dev.loss < self.history.best.dev_loss
        return dev.score > self.score

    @torch.no_grad()
    def restore(self) -> None:
        """Put the best epoch's tensors back in place."""
        assert self.state is not None
        for name, param in self.trainable:
            param.copy_(self.state[name])
