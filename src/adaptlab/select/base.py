"""The shape every transferability estimator shares, scikit-learn's: `fit(features, labels)`
returns the estimator with the score in `score_`, and `score(features, labels)` returns it.

Higher is better for every estimator. Inputs are checked once here so each estimator can
assume finite float64 features (n x d) and integer class ids 0..K-1 (or float targets).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar, Self

import numpy as np
from numpy.typing import ArrayLike, NDArray

from adaptlab.errors import ConfigError, DataError

Floats = NDArray[np.float64]
Ints = NDArray[np.int64]


@dataclass(frozen=True)
class Target:
    """Checked labels: class ids 0..K-1 (classification) or float values (regression)."""

    values: NDArray[np.generic]
    regression: bool

    @property
    def classes(self) -> Ints:
        """Class ids 0..K-1 (classification only)."""
        return np.asarray(self.values, dtype=np.int64)

    @property
    def class_count(self) -> int:
        return int(self.classes.max()) + 1


class Estimator(ABC):
    """A transferability score of features for labels; higher means a better starting point."""

    name: ClassVar[str]
    regression: ClassVar[bool] = False
    """Whether the estimator accepts float (regression) targets."""
    score_: float
    """The score of the last `fit`."""

    def fit(self, features: ArrayLike, labels: ArrayLike) -> Self:
        """Score `features` (n x d) for `labels` (n class ids, or n floats for regression) and
        keep the score as `score_`; returns the estimator, as scikit-learn's `fit` does."""
        x, target = check_inputs(features, labels, self.name)
        if target.regression and not self.regression:
            raise ConfigError(
                f"estimator {self.name!r} needs class labels; for regression targets use "
                "logme or knn"
            )
        score = float(self._score(x, target))
        if not np.isfinite(score):
            raise DataError(f"estimator {self.name!r} gave a non-finite score on these features")
        self.score_ = score
        return self

    def score(self, features: ArrayLike, labels: ArrayLike) -> float:
        """The score of `features` for `labels`: `fit` on them, then `score_` (the score is a
        property of these features and labels; nothing fitted carries over to other data)."""
        return self.fit(features, labels).score_

    @abstractmethod
    def _score(self, x: Floats, target: Target) -> float:
        """The score on checked inputs."""

    def needed_per_class(self) -> int:
        """Examples of every class below which the score says nothing: 2, since a class's
        mean and spread (every estimator's class statistics) need two examples."""
        return 2


def check_inputs(features: ArrayLike, labels: ArrayLike, name: str) -> tuple[Floats, Target]:
    """Finite 2-d float64 features and labels of the same length, at least 2 examples.

    Integer (or bool) labels are classes: re-numbered 0..K-1, K >= 2 needed. Float labels are
    regression targets and must not be constant.
    """
    x = np.asarray(features, dtype=np.float64)
    y = np.asarray(labels)
    if x.ndim != 2:
        raise DataError(f"{name}: features must be a 2-d array (examples x dims), got {x.shape}")
    if y.ndim != 1 or len(y) != len(x):
        raise DataError(f"{name}: need one label per example: {len(x)} examples, {y.shape} labels")
    if len(x) < 2:
        raise DataError(f"{name}: need at least 2 examples, got {len(x)}")
    if not np.isfinite(x).all():
        raise DataError(f"{name}: features contain NaN or infinity")
    if np.issubdtype(y.dtype, np.floating):
        if not np.isfinite(y).all():
            raise DataError(f"{name}: regression targets contain NaN or infinity")
        if np.ptp(y) == 0:
            raise DataError(f"{name}: regression targets are all equal; nothing to predict")
        return x, Target(y.astype(np.float64), regression=True)
    if not (np.issubdtype(y.dtype, np.integer) or y.dtype == np.bool_):
        raise DataError(f"{name}: labels must be integers (classes) or floats, got {y.dtype}")
    _, ids = np.unique(y, return_inverse=True)
    if ids.max() < 1:
        raise DataError(f"{name}: all {len(y)} labels are the same class; need at least 2")
    return x, Target(ids.astype(np.int64), regression=False)


def one_hot(classes: Ints, count: int) -> Floats:
    """n x K indicator matrix of class ids."""
    hot = np.zeros((len(classes), count))
    hot[np.arange(len(classes)), classes] = 1.0
    return hot


def centred(x: Floats) -> Floats:
    """Features minus their mean."""
    return x - x.mean(axis=0, keepdims=True)


def unit_scale(x: Floats) -> Floats | None:
    """Centred features scaled to mean squared norm 1; None when every feature is constant."""
    z = centred(x)
    power = float((z * z).sum()) / len(z)
    if power <= np.finfo(np.float64).tiny * z.size:
        return None
    return z / np.sqrt(power)
