"""Leave-one-out k-nearest-neighbour accuracy (or R^2 for regression) on the features.

A non-parametric probe of how well the target is already arranged in feature space, used as a
transferability baseline since Kornblith, Shlens and Le 2019 ("Do Better ImageNet Models
Transfer Better?", CVPR) and the leave-one-out kNN view of Feng et al. 2022 ("Rethinking
Supervised Pre-training for Better Downstream Transferring", ICLR).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from adaptlab.errors import ConfigError
from adaptlab.select.base import Estimator, Floats, Ints, Target

_CHUNK = 1024


@dataclass
class KNN(Estimator):
    """Each example predicted from its k nearest others (Euclidean); ties go to the nearest."""

    k: int = 5
    name = "knn"
    regression = True

    def __post_init__(self) -> None:
        if self.k < 1:
            raise ConfigError(f"knn: k must be at least 1, got {self.k}")

    def needed_per_class(self) -> int:
        """An example is voted right only when more than half its k neighbours share its class:
        k // 2 + 1 others of the class, so the class needs k // 2 + 2 examples."""
        return self.k // 2 + 2

    def _score(self, x: Floats, target: Target) -> float:
        neighbours = _neighbours(x, min(self.k, len(x) - 1))
        if target.regression:
            y = target.values.astype(np.float64)
            predicted = y[neighbours].mean(axis=1)
            return 1.0 - float(((predicted - y) ** 2).mean()) / float(y.var())
        classes = target.classes
        votes = np.zeros((len(x), target.class_count))
        # nearest neighbour gets a tiny extra vote so ties go to it
        weights = 1.0 + 1e-6 * (neighbours.shape[1] - np.arange(neighbours.shape[1]))
        np.add.at(votes, (np.arange(len(x))[:, None], classes[neighbours]), weights)
        return float((votes.argmax(axis=1) == classes).mean())


def _neighbours(x: Floats, k: int) -> Ints:
    """Indices of the k nearest other examples of each example, nearest first (stable ties)."""
    squares = (x * x).sum(axis=1)
    found = np.empty((len(x), k), dtype=np.int64)
    for start in range(0, len(x), _CHUNK):
        rows = slice(start, start + _CHUNK)
        distances = squares[rows, None] + squares[None, :] - 2.0 * x[rows] @ x.T
        distances[np.arange(distances.shape[0]), np.arange(start, start + distances.shape[0])] = (
            np.inf
        )
        found[rows] = np.argsort(distances, axis=1, kind="stable")[:, :k]
    return found
