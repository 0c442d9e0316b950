"""Continual-learning scores of a score matrix R, where R[i][j] is the score on stage j's
test set after training stage i (stages counted from 0): accuracy for classification stages,
perplexity for language-modelling stages.

Definitions (T stages):

- average score (Lopez-Paz & Ranzato 2017, GEM, §2 "ACC"): mean_j R[T-1][j];
- backward transfer (GEM §2 "BWT"): mean over j < T-1 of R[T-1][j] - R[j][j]; negative values
  are forgetting;
- forward transfer against single-stage scores s_j (the same model and method trained on stage
  j alone): mean over j >= 1 of R[j][j] - s_j. GEM's own FWT compares R[j-1][j] with a
  randomly initialised model's score b_j; with a new head per stage R[j-1][j] is a chance-level
  score, so `forward_transfer` takes the single-stage reference instead, and
  `gem_forward_transfer` keeps GEM's form for a user who has b;
- forgetting of stage j after the last stage (Chaudhry et al. 2018, RWalk, "forgetting
  measure"): f_j = max over l < T-1 of R[l][j] - R[T-1][j], for j < T-1 (the best score the
  stage ever had, minus the final one); its mean is the average forgetting.

For a metric where lower is better (perplexity), every difference is taken the other way round
(`gain`: -1), so the signs read the same for every metric: a negative BWT or FWT is a loss, a
positive forgetting is what was lost (f_j = R[T-1][j] - the lowest earlier R[l][j]), each in the
metric's own units. The average stays the plain mean.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from adaptlab.errors import ConfigError

Matrix = Sequence[Sequence[float]]

LOWER_IS_BETTER = frozenset({"perplexity"})
"""Matrix metrics where a smaller value is the better one."""


def gain(metric: str) -> int:
    """+1 where higher is better, -1 where lower is (`LOWER_IS_BETTER`)."""
    return -1 if metric in LOWER_IS_BETTER else 1


@dataclass(frozen=True)
class ContinualScores:
    """The summary of one accuracy matrix; None where a sequence of one stage has no value, or
    (for FWT) where no single-stage scores were given."""

    average: float
    backward_transfer: float | None
    forward_transfer: float | None
    forgetting: tuple[float, ...]
    """Per stage j < T-1 (the last stage cannot have forgotten anything yet)."""

    @property
    def average_forgetting(self) -> float | None:
        return sum(self.forgetting) / len(self.forgetting) if self.forgetting else None

    def to_dict(self) -> dict[str, object]:
        return {
            "average": self.average,
            "backward_transfer": self.backward_transfer,
            "forward_transfer": self.forward_transfer,
            "forgetting": list(self.forgetting),
            "average_forgetting": self.average_forgetting,
        }


def check_matrix(matrix: Matrix) -> int:
    """The number of stages of a square matrix of finite numbers; ConfigError otherwise."""
    stages = len(matrix)
    if stages == 0:
        raise ConfigError("the accuracy matrix is empty; a sequence needs at least one stage")
    for i, row in enumerate(matrix):
        if len(row) != stages:
            raise ConfigError(
                f"the accuracy matrix must be square: row {i} has {len(row)} scores, not {stages}"
            )
        for j, value in enumerate(row):
            if not isinstance(value, int | float) or value != value:
                raise ConfigError(f"accuracy matrix R[{i}][{j}] is not a number: {value!r}")
    return stages


def average_score(matrix: Matrix) -> float:
    """GEM's ACC: the mean score over every stage after the last stage."""
    last = matrix[check_matrix(matrix) - 1]
    return sum(last) / len(last)


def backward_transfer(matrix: Matrix, sign: int = 1) -> float | None:
    """GEM's BWT: mean of R[T-1][j] - R[j][j] over j < T-1, times `sign` (`gain`: -1 for a
    lower-is-better metric); None for one stage."""
    stages = check_matrix(matrix)
    if stages < 2:
        return None
    last = matrix[-1]
    return sign * sum(last[j] - matrix[j][j] for j in range(stages - 1)) / (stages - 1)


def forward_transfer(matrix: Matrix, single: Sequence[float], sign: int = 1) -> float | None:
    """Mean of R[j][j] - single[j] over j >= 1, times `sign`: what the earlier stages did for
    stage j compared with training on it alone (None for one stage)."""
    stages = check_matrix(matrix)
    _check_reference(single, stages, "single-stage scores")
    if stages < 2:
        return None
    return sign * sum(matrix[j][j] - single[j] for j in range(1, stages)) / (stages - 1)


def gem_forward_transfer(matrix: Matrix, initial: Sequence[float]) -> float | None:
    """GEM's FWT: mean of R[j-1][j] - initial[j] over j >= 1, `initial` being the scores of
    the model before any training (None for one stage)."""
    stages = check_matrix(matrix)
    _check_reference(initial, stages, "initial scores")
    if stages < 2:
        return None
    return sum(matrix[j - 1][j] - initial[j] for j in range(1, stages)) / (stages - 1)


def forgetting(matrix: Matrix, sign: int = 1) -> tuple[float, ...]:
    """Chaudhry et al. (2018): per stage j < T-1, max over l < T-1 of R[l][j] minus R[T-1][j]
    (with `sign` -1: R[T-1][j] minus the min, for a lower-is-better metric).

    Only rows l >= j count: before stage j was trained its score says nothing of what was
    learnt.
    """
    stages = check_matrix(matrix)
    last = matrix[-1]
    return tuple(
        max(sign * matrix[row][j] for row in range(j, stages - 1)) - sign * last[j]
        for j in range(stages - 1)
    )


def summarize(
    matrix: Matrix, single: Sequence[float] | None = None, metric: str = "accuracy"
) -> ContinualScores:
    """Every score of `matrix` of `metric`; forward transfer only when single-stage scores are
    given."""
    sign = gain(metric)
    return ContinualScores(
        average=average_score(matrix),
        backward_transfer=backward_transfer(matrix, sign),
        forward_transfer=None if single is None else forward_transfer(matrix, single, sign),
        forgetting=forgetting(matrix, sign),
    )


def _check_reference(values: Sequence[float], stages: int, what: str) -> None:
    if len(values) != stages:
        raise ConfigError(f"{what}: expected one per stage ({stages}), got {len(values)}")


def stored_scores(
    matrix: Matrix, single: Sequence[float] | None, metric: str = "accuracy"
) -> ContinualScores:
    """`summarize` of a matrix read back from a record; where a score is NaN or infinite (the
    sequence diverged) every summary score is NaN, so the record still reads and a report can
    show it as diverged."""
    values = [value for row in matrix for value in row] + list(single or ())
    finite = all(isinstance(v, int | float) and math.isfinite(v) for v in values)
    if finite or any(len(row) != len(matrix) for row in matrix):
        return summarize(matrix, single, metric)  # refuses a malformed matrix
    several = len(matrix) > 1
    return ContinualScores(
        average=math.nan,
        backward_transfer=math.nan if several else None,
        forward_transfer=math.nan if several and single is not None else None,
        forgetting=(math.nan,) * (len(matrix) - 1),
    )
