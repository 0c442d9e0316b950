"""H-score with a shrunk feature covariance.

Bao, Li, Huang, Wang, Zheng and Li 2019, "An Information-theoretic Approach to Transferability in
Task Transfer Learning" (ICIP), Def. 2: H(f) = tr(cov(f)^-1 cov(E[f | y])). Ibrahim, Ponomareva and
Mazumder 2022, "Newer is not always better: Rethinking transferability metrics, their
peculiarities, stability and performance" (ECML-PKDD), §4: replace cov(f) by the Ledoit-Wolf
shrinkage estimate, which keeps the score stable when d is large against n.
"""

from __future__ import annotations

import numpy as np

from adaptlab.select.base import Estimator, Floats, Target, centred


class HScore(Estimator):
    """Between-class variance in the metric of the (shrunk) total feature covariance."""

    name = "hscore"

    def _score(self, x: Floats, target: Target) -> float:
        z = centred(x)
        n, d = z.shape
        covariance = ledoit_wolf(z)
        if not np.any(covariance):
            return 0.0  # constant features explain no class variance
        classes = target.classes
        means = np.zeros((target.class_count, d))
        np.add.at(means, classes, z)
        counts = np.bincount(classes, minlength=target.class_count)[:, None]
        g = (means / counts)[classes]  # each example replaced by its class mean: E[f | y]
        between = g.T @ g / n
        values, vectors = np.linalg.eigh(covariance)
        values = np.maximum(values, values.max() * 1e-12)
        inverse = (vectors / values) @ vectors.T
        return float(np.trace(inverse @ between))


def ledoit_wolf(z: Floats) -> Floats:
    """Ledoit and Wolf (2004) shrinkage of the covariance of centred `z` toward mu * I."""
    n, d = z.shape
    sample = z.T @ z / n
    mu = float(np.trace(sample)) / d
    # delta^2 = ||S - mu I||_F^2 / d;  b^2 = sum_i ||z_i z_i^T - S||_F^2 / (n^2 d)
    delta = float(((sample - mu * np.eye(d)) ** 2).sum()) / d
    norms = (z * z).sum(axis=1)
    b = max(float((norms**2).sum()) - n * float((sample**2).sum()), 0.0) / (n * n * d)
    shrinkage = 1.0 if delta <= 0 else min(b / delta, 1.0)
    return (1.0 - shrinkage) * sample + shrinkage * mu * np.eye(d)
