"""Refining knowledge neurons across prompts (threshold, sharing, moving p into 2..5)."""

from __future__ import annotations

import pytest
import torch

from adaptlab.errors import ConfigError
from adaptlab.knowledge.refine import coarse_neurons, refine


def _scores(prompts: int, layers: int = 3, neurons: int = 10) -> list[torch.Tensor]:
    return [torch.zeros(layers, neurons) for _ in range(prompts)]


def test_threshold_keeps_scores_above_a_share_of_the_maximum() -> None:
    scores = torch.tensor([[1.0, 0.25, 0.1], [0.0, -2.0, 0.21]])
    assert coarse_neurons(scores, 0.2) == {(0, 0), (0, 1), (1, 2)}
    assert coarse_neurons(-scores.abs()) == set()


def test_share_rises_until_at_most_five_remain() -> None:
    scores = _scores(10)
    for n, prompt in enumerate(scores):  # neuron (0, i) is shared by 10 - i prompts
        for i in range(10 - n):
            prompt[0, i] = 1.0
        for j in range(n + 1):
            scores[j][0, n] = 1.0
    result = refine(scores)
    assert 2 <= len(result.neurons) <= 5
    assert result.share > 0.7


def test_share_falls_until_two_remain() -> None:
    scores = _scores(10)
    for n, prompt in enumerate(scores):
        prompt[1, 3] = 1.0  # in every prompt
        if n < 6:
            prompt[2, 7] = 0.9  # in 6 of 10 prompts: kept once p drops below 60%
        prompt[0, n] = 0.5  # one prompt each: noise
    result = refine(scores)
    assert result.neurons == [(1, 3), (2, 7)]
    assert result.share == pytest.approx(0.55)
    assert result.scores[0] == pytest.approx(1.0)


def test_at_most_five_when_moving_p_jumps_over_the_range() -> None:
    scores = _scores(4, neurons=20)
    for prompt in scores:
        prompt[0, :8] = torch.linspace(1.0, 0.5, 8)  # eight neurons shared by every prompt
    result = refine(scores)
    assert result.neurons == [(0, i) for i in range(5)]


def test_refining_needs_prompts() -> None:
    with pytest.raises(ConfigError):
        refine([])
