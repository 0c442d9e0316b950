"""NLEEP: LEEP computed over a Gaussian mixture of the features instead of a source classifier.

Li, Jia, Zhu, Zhou, Zhu, Chen, Hao, Li and Zhou 2021, "Ranking Neural Checkpoints" (CVPR), §4.2:
reduce the features with PCA (keeping 80% of the variance), fit a Gaussian mixture, and use each
example's posterior over the mixture components as the "source label" distribution of LEEP
(Nguyen, Hassner, Seeger and Archambeau 2020, "LEEP: A New Measure to Evaluate Transferability
of Learned Representations", ICML, eq. 1-2). Encoders have no source classifier, so this is the
LEEP that applies to them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import logsumexp

from adaptlab.errors import ConfigError
from adaptlab.select.base import Estimator, Floats, Target, one_hot
from adaptlab.select.pca import pca


@dataclass
class NLEEP(Estimator):
    """Average log-likelihood of the labels through the empirical P(y | component)."""

    components_per_class: int = 5
    variance: float = 0.8
    max_dims: int = 64
    iterations: int = 50
    seed: int = 0
    name = "nleep"

    def __post_init__(self) -> None:
        if self.components_per_class < 1:
            raise ConfigError("nleep: components_per_class must be at least 1")
        if not 0 < self.variance <= 1:
            raise ConfigError(f"nleep: variance must be in (0, 1], got {self.variance}")

    def needed_per_class(self) -> int:
        """More examples than mixture components (components_per_class per class): with one
        component per example, P(y | component) is exact and the score is 0 for any model."""
        return self.components_per_class + 1

    def _score(self, x: Floats, target: Target) -> float:
        classes, count = target.classes, target.class_count
        reduced = pca(x, variance=self.variance, max_dims=self.max_dims)
        components = min(self.components_per_class * count, len(x))
        posterior = gaussian_mixture(reduced, components, self.iterations, self.seed)
        # LEEP (Nguyen et al. 2020, eq. 1-2): joint P(y, z) from posteriors, P(y | z) = P(y, z)
        # / P(z), score = mean_i log sum_z P(y_i | z) theta_i(z)
        joint = one_hot(classes, count).T @ posterior / len(x)
        conditional = joint / np.maximum(joint.sum(axis=0, keepdims=True), 1e-300)
        likelihood = (posterior * conditional[classes]).sum(axis=1)
        return float(np.log(np.maximum(likelihood, 1e-300)).mean())


def gaussian_mixture(x: Floats, components: int, iterations: int, seed: int) -> Floats:
    """Posterior responsibilities (n x components) of a diagonal Gaussian mixture fitted by EM."""
    n, d = x.shape
    if d == 0:
        return np.full((n, components), 1.0 / components)
    rng = np.random.default_rng(seed)
    floor = 1e-6 * float(x.var(axis=0).mean()) + 1e-12
    means = x[rng.choice(n, size=components, replace=False)]
    variances = np.tile(x.var(axis=0) + floor, (components, 1))
    weights = np.full(components, 1.0 / components)
    for _ in range(iterations):
        log_p = _log_densities(x, means, variances) + np.log(weights)
        log_r = log_p - logsumexp(log_p, axis=1, keepdims=True)
        r = np.exp(log_r)
        mass = r.sum(axis=0) + 1e-10
        weights = mass / n
        means = (r.T @ x) / mass[:, None]
        variances = (r.T @ (x * x)) / mass[:, None] - means**2 + floor
        variances = np.maximum(variances, floor)
    log_p = _log_densities(x, means, variances) + np.log(weights)
    return np.exp(log_p - logsumexp(log_p, axis=1, keepdims=True))


def _log_densities(x: Floats, means: Floats, variances: Floats) -> Floats:
    """log N(x_i; mu_c, diag(var_c)) for every example and component (n x components)."""
    precision = 1.0 / variances
    quadratic = (
        (x * x) @ precision.T - 2.0 * x @ (means * precision).T + (means**2 * precision).sum(1)
    )
    return -0.5 * (quadratic + np.log(2 * np.pi * variances).sum(axis=1))
