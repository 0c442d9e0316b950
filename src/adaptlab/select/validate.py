"""How well an estimator's scores predict fine-tuned test scores of the same candidates."""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from scipy import stats

from adaptlab.errors import DataError
from adaptlab.select.ranking import Ranking, RankRow


@dataclass(frozen=True)
class Agreement:
    """Rank and linear correlation of estimator scores with fine-tuned scores.

    A correlation is None where it is undefined (fewer than 2 or 3 candidates, or constant
    scores on either side).
    """

    kendall_tau: float | None
    weighted_tau: float | None
    pearson: float | None
    candidates: int

    @classmethod
    def from_dict(cls, stored: Mapping[str, Any]) -> Agreement:
        """The stored form (`Validation.to_dict`); a correlation stored as NaN reads as None.
        KeyError, TypeError or ValueError when it is malformed."""
        return cls(
            kendall_tau=_defined(stored["kendall_tau"]),
            weighted_tau=_defined(stored["weighted_tau"]),
            pearson=_defined(stored["pearson"]),
            candidates=int(stored["candidates"]),
        )


def agreement(estimates: Sequence[float], fine_tuned: Sequence[float]) -> Agreement:
    """Kendall's tau-b, weighted tau (top ranks weigh more; Vigna 2015) and Pearson's r."""
    if len(estimates) != len(fine_tuned):
        raise DataError(
            f"{len(estimates)} estimator scores but {len(fine_tuned)} fine-tuned scores"
        )
    n = len(estimates)
    constant = len(set(estimates)) < 2 or len(set(fine_tuned)) < 2
    if n < 2 or constant:
        return Agreement(None, None, None, n)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tau = stats.kendalltau(estimates, fine_tuned).statistic
        weighted = stats.weightedtau(estimates, fine_tuned).statistic
        pearson = stats.pearsonr(estimates, fine_tuned).statistic if n >= 3 else math.nan
    return Agreement(_defined(tau), _defined(weighted), _defined(pearson), n)


def _defined(value: float | None) -> float | None:
    """The value, or None where it is undefined (None, or NaN as scipy gives it)."""
    number = None if value is None else float(value)
    return number if number is not None and math.isfinite(number) else None


@dataclass(frozen=True)
class Validation:
    """Estimator scores of the candidates that have fine-tuned runs, and their agreement.

    `candidates` maps a run key (a built-in name or model folder name) to the candidate's name
    in the ranking; `scores` holds the estimator scores per run key.
    """

    data: str
    candidates: dict[str, str]
    fine_tuned: dict[str, float]
    scores: dict[str, dict[str, float]]
    agreements: dict[str, Agreement]

    def to_dict(self) -> dict[str, Any]:
        return {
            "data": self.data,
            "candidates": self.candidates,
            "fine_tuned": self.fine_tuned,
            "scores": self.scores,
            "estimators": {name: asdict(result) for name, result in self.agreements.items()},
        }

    @classmethod
    def from_dict(cls, stored: Mapping[str, Any]) -> Validation:
        """The stored form `to_dict` wrote (a results store keeps it); every fine-tuned
        candidate must have a name and a score per estimator. KeyError, TypeError or ValueError
        when it is malformed."""
        agreements = {
            str(name): Agreement.from_dict(found) for name, found in stored["estimators"].items()
        }
        fine_tuned = {str(key): float(score) for key, score in stored["fine_tuned"].items()}
        return cls(
            data=str(stored["data"]),
            candidates={key: str(stored["candidates"][key]) for key in fine_tuned},
            fine_tuned=fine_tuned,
            scores={
                key: {name: float(stored["scores"][key][name]) for name in agreements}
                for key in fine_tuned
            },
            agreements=agreements,
        )

    def ranked(self) -> list[tuple[str, float, tuple[float, ...]]]:
        """(candidate, fine-tuned score, its score per estimator), best fine-tuned first."""
        rows = [
            (self.candidates[key], score, tuple(self.scores[key][name] for name in self.agreements))
            for key, score in self.fine_tuned.items()
        ]
        return sorted(rows, key=lambda row: -row[1])


def validate(
    ranking: Ranking, rows: Sequence[RankRow], fine_tuned: Mapping[str, float], what: str
) -> Validation:
    """Match `rows` to fine-tuned scores by run key and correlate every estimator with them.

    The first row of a run key counts (`tiny#L1` and `tiny@first1#L1` stand for one run).
    """
    matched: dict[str, RankRow] = {}
    for row in rows:
        if row.key is not None and row.key in fine_tuned:
            matched.setdefault(row.key, row)
    if not matched:
        raise DataError(
            f"none of the {what} has fine-tuned runs in the store (it holds: "
            f"{', '.join(sorted(fine_tuned))})"
        )
    keys = list(matched)
    targets = [fine_tuned[key] for key in keys]
    return Validation(
        data=ranking.data,
        candidates={key: matched[key].name for key in keys},
        fine_tuned=dict(zip(keys, targets, strict=True)),
        scores={key: dict(matched[key].scores) for key in keys},
        agreements={
            name: agreement([matched[key].scores[name] for key in keys], targets)
            for name in ranking.estimators
        },
    )
