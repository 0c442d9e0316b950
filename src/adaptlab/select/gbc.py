"""GBC: Gaussian Bhattacharyya coefficient between the classes in feature space.

Pandy, Agostinelli, Uijlings, Ferrari and Mensink 2022, "Transferability Estimation using
Bhattacharyya Class Separability" (CVPR), §3: fit a Gaussian with diagonal covariance to each
class (on PCA-reduced features), compute the Bhattacharyya coefficient BC = exp(-D_B) for every
pair of classes, and score -sum_{i != j} BC(c_i, c_j): less overlap, higher score (at most 0).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from adaptlab.select.base import Estimator, Floats, Target
from adaptlab.select.pca import pca


@dataclass
class GBC(Estimator):
    """Minus the summed pairwise Bhattacharyya overlap of per-class diagonal Gaussians."""

    max_dims: int = 64
    name = "gbc"

    def _score(self, x: Floats, target: Target) -> float:
        reduced = pca(x, max_dims=self.max_dims)
        classes, count = target.classes, target.class_count
        # one-example classes have zero variance: a floor relative to the total keeps D_B finite
        floor = 1e-6 * float(reduced.var(axis=0).mean()) if reduced.shape[1] else 0.0
        means = np.stack([reduced[classes == c].mean(axis=0) for c in range(count)])
        variances = np.stack([reduced[classes == c].var(axis=0) for c in range(count)])
        variances = variances + floor + 1e-12
        total = 0.0
        for i in range(count):
            for j in range(i + 1, count):
                total += 2.0 * np.exp(
                    -_bhattacharyya(means[i], variances[i], means[j], variances[j])
                )
        return -total


def _bhattacharyya(m1: Floats, v1: Floats, m2: Floats, v2: Floats) -> float:
    """D_B of two diagonal Gaussians (Pandy et al. 2022, eq. 3)."""
    v = (v1 + v2) / 2.0
    mahalanobis = float(((m1 - m2) ** 2 / v).sum()) / 8.0
    log_dets = 0.5 * float((np.log(v) - 0.5 * (np.log(v1) + np.log(v2))).sum())
    return mahalanobis + log_dets
