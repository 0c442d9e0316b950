"""The epoch loop (a run's and a sequence stage's alike) keeps the best dev epoch; when epochs
tie on the dev score (exact match on a small dev set, say) the one with the lower dev loss is
kept, whichever way float noise tips the score, and a later epoch that ties without a lower
loss never displaces an earlier one."""

from __future__ import annotations

import math
from collections.abc import Sequence

import pytest
import torch
from torch import nn

from adaptlab.engine.loop import train_epochs
from adaptlab.engine.objective import DevScore
from adaptlab.engine.scale_model import FLOAT32
from adaptlab.records.config import TrainConfig
from adaptlab.tasks.judging import beats, scores_tie

EXACT_MATCH = 13 / 30  # 0.4333...: 13 of 30 dev questions right
BELOW, ABOVE = math.nextafter(EXACT_MATCH, 0.0), math.nextafter(EXACT_MATCH, 1.0)
"""The same score one float step away, as another order of summing may give it."""


class ScriptedObjective:
    """A tiny regression whose dev evaluations are given: `(score, loss)` per epoch. Each dev
    call also keeps the model's weight as it is then, to check which epoch's comes back."""

    title, metric, examples = "", "exact_match", 4

    def __init__(self, model: nn.Linear, dev_scores: Sequence[tuple[float, float]]) -> None:
        self.model, self.scripted = model, list(dev_scores)
        self.weights: list[torch.Tensor] = []

    def batch(self, indices: list[int], generator: torch.Generator) -> torch.Tensor:
        return torch.ones(len(indices), 2) * (1 + torch.tensor(indices, dtype=torch.float)[:, None])

    def loss(self, batch: torch.Tensor) -> torch.Tensor:
        return (self.model(batch) - 1.0).pow(2).mean()

    def dev(self) -> DevScore:
        self.weights.append(self.model.weight.detach().clone())
        score, loss = self.scripted[len(self.weights) - 1]
        return DevScore(loss, {self.metric: score}, score)


def train(dev_scores: Sequence[tuple[float, float]]) -> tuple[int, nn.Linear, ScriptedObjective]:
    """Train for one epoch per scripted dev score; the best epoch and the model after."""
    torch.manual_seed(0)
    model = nn.Linear(2, 1)
    objective = ScriptedObjective(model, dev_scores)
    config = TrainConfig(epochs=len(dev_scores), batch_size=2, learning_rate=0.05, seed=0)
    history = train_epochs(model, objective, config, 0.05, scale=FLOAT32, progress=False)
    return history.best_epoch, model, objective


def test_a_tied_score_keeps_the_epoch_with_the_lower_dev_loss() -> None:
    best, model, objective = train([(EXACT_MATCH, math.log(3.82)), (BELOW, math.log(3.36))])
    assert best == 2
    assert torch.equal(model.weight, objective.weights[1])
    assert not torch.equal(objective.weights[0], objective.weights[1])
    assert train([(EXACT_MATCH, math.log(3.36)), (ABOVE, math.log(3.82))])[0] == 1


def test_a_tie_without_a_lower_dev_loss_keeps_the_earlier_epoch() -> None:
    assert train([(0.5, 1.0), (0.5, 1.2), (0.5, 1.0), (0.5, float("nan"))])[0] == 1


def test_a_higher_score_wins_whatever_its_dev_loss() -> None:
    assert train([(0.4, 1.0), (0.5, 2.0), (0.5, 1.5), (0.45, 0.1)])[0] == 3


@pytest.mark.parametrize(
    ("a", "b", "tie"),
    [
        (EXACT_MATCH, BELOW, True),
        (EXACT_MATCH, sum([1 / 30] * 13), True),
        (0.0, 1e-13, True),
        (0.5, 0.5 + 1e-6, False),  # one example in a million still counts
        (0.433, 0.4, False),
    ],
)
def test_scores_tie_only_up_to_float_noise(a: float, b: float, tie: bool) -> None:
    assert scores_tie(a, b) is tie and scores_tie(b, a) is tie
    assert beats(max(a, b), min(a, b)) is not tie
    assert not beats(min(a, b), max(a, b))
