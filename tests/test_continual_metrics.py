"""Continual-learning scores on hand-made matrices whose values are worked out by hand."""

from __future__ import annotations

import pytest

from adaptlab.continual import (
    average_score,
    backward_transfer,
    forgetting,
    forward_transfer,
    gem_forward_transfer,
    summarize,
)
from adaptlab.errors import ConfigError

# R[i][j]: score on stage j after training stage i.
R = [
    [0.90, 0.10, 0.20],
    [0.70, 0.80, 0.30],
    [0.60, 0.75, 0.85],
]


def test_average_is_the_mean_of_the_last_row() -> None:
    assert average_score(R) == pytest.approx((0.60 + 0.75 + 0.85) / 3)


def test_backward_transfer_compares_final_with_just_trained() -> None:
    # ((0.60 - 0.90) + (0.75 - 0.80)) / 2
    assert backward_transfer(R) == pytest.approx(-0.175)


def test_forward_transfer_against_single_stage_scores() -> None:
    single = [0.90, 0.70, 0.95]
    # ((0.80 - 0.70) + (0.85 - 0.95)) / 2
    assert forward_transfer(R, single) == pytest.approx(0.0)
    assert forward_transfer(R, [0.9, 0.6, 0.75]) == pytest.approx(0.15)


def test_gem_forward_transfer_uses_the_score_before_the_stage() -> None:
    # ((R[0][1] - b1) + (R[1][2] - b2)) / 2 = ((0.10 - 0.05) + (0.30 - 0.10)) / 2
    assert gem_forward_transfer(R, [0.0, 0.05, 0.10]) == pytest.approx(0.125)


def test_forgetting_is_best_earlier_score_minus_final() -> None:
    matrix = [
        [0.50, 0.0, 0.0],
        [0.80, 0.70, 0.0],  # stage 0 improved after stage 1: its best is 0.80
        [0.60, 0.75, 0.90],  # stage 1 improved: no forgetting, negative value
    ]
    assert forgetting(matrix) == pytest.approx((0.20, -0.05))
    assert summarize(matrix).average_forgetting == pytest.approx(0.075)


def test_upper_triangle_is_ignored_by_forgetting() -> None:
    matrix = [[0.5, 0.99], [0.4, 0.6]]  # 0.99: stage 1 tested before it was trained
    assert forgetting(matrix) == pytest.approx((0.1,))


def test_one_stage_has_no_transfer() -> None:
    scores = summarize([[0.7]], single=[0.7])
    assert scores.average == pytest.approx(0.7)
    assert scores.backward_transfer is None
    assert scores.forward_transfer is None
    assert scores.forgetting == ()
    assert scores.average_forgetting is None


def test_summary_without_single_scores_has_no_forward_transfer() -> None:
    scores = summarize(R)
    assert scores.forward_transfer is None
    assert scores.to_dict()["backward_transfer"] == pytest.approx(-0.175)


@pytest.mark.parametrize(
    ("matrix", "message"),
    [([], "empty"), ([[0.1, 0.2]], "square"), ([[float("nan")]], "not a number")],
)
def test_bad_matrices_are_refused(matrix: list[list[float]], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        summarize(matrix)


def test_reference_needs_one_score_per_stage() -> None:
    with pytest.raises(ConfigError, match="one per stage"):
        forward_transfer(R, [0.5, 0.5])
