"""LogME: the log marginal evidence of a Bayesian linear model from features to each target.

You, Liu, Wang and Long 2021, "LogME: Practical Assessment of Pre-trained Models for Transfer
Learning" (ICML), §4.2-4.3: maximise the evidence over the prior precision alpha and the noise
precision beta with fixed-point updates, using one eigendecomposition of the features per data
set; the score is the evidence per example, averaged over the K one-hot targets.
"""

from __future__ import annotations

import numpy as np

from adaptlab.select.base import Estimator, Floats, Target, one_hot

_MAX_ITERATIONS = 100
_TOLERANCE = 1e-5
_FLOOR = 1e-12


class LogME(Estimator):
    """Evidence of a linear model on the features (classification and regression)."""

    name = "logme"
    regression = True

    def _score(self, x: Floats, target: Target) -> float:
        n, d = x.shape
        y = (
            np.asarray(target.values, dtype=np.float64)[:, None]
            if target.regression
            else one_hot(target.classes, target.class_count)
        )
        sigma, projected = _spectrum(x, y)
        evidences = [
            _evidence(sigma, projected[:, k], float(y[:, k] @ y[:, k]), n, d)
            for k in range(y.shape[1])
        ]
        return float(np.mean(evidences))


def _spectrum(x: Floats, y: Floats) -> tuple[Floats, Floats]:
    """Non-zero eigenvalues s_i^2 of F^T F and the targets in the matching left basis (U^T y)."""
    n, d = x.shape
    if n > d:  # d x d eigenproblem: x = U S V^T, so U^T y = S^-1 V^T x^T y
        sigma, v = np.linalg.eigh(x.T @ x)
        keep = sigma > sigma.max(initial=0.0) * 1e-12
        sigma, v = sigma[keep], v[:, keep]
        return sigma, (v.T @ (x.T @ y)) / np.sqrt(sigma)[:, None]
    sigma, u = np.linalg.eigh(x @ x.T)
    keep = sigma > sigma.max(initial=0.0) * 1e-12
    return sigma[keep], u[:, keep].T @ y


def _evidence(sigma: Floats, z: Floats, y_norm2: float, n: int, d: int) -> float:
    """Maximised log evidence per example for one target column (You et al. 2021, Alg. 2)."""
    outside = max(y_norm2 - float(z @ z), 0.0)  # ||y||^2 outside the span of the features
    alpha, beta = 1.0, 1.0
    if len(sigma) == 0 or float(z @ z) <= 1e-12 * y_norm2:
        # features carry nothing about y: the evidence peaks at m = 0 (alpha -> infinity), where
        # the alpha terms of eq. 2 cancel and beta = n / ||y||^2.
        beta = n / y_norm2
        return 0.5 * (np.log(beta) - np.log(2 * np.pi) - 1.0)
    for _ in range(_MAX_ITERATIONS):
        # §4.3 fixed point: gamma = sum beta s / (alpha + beta s), alpha = gamma / m^T m,
        # beta = (n - gamma) / ||F m - y||^2, with m and the residual in the eigenbasis.
        shrink = alpha + beta * sigma
        gamma = float((beta * sigma / shrink).sum())
        m2 = float((beta**2 * sigma * z**2 / shrink**2).sum())
        residual = float((alpha**2 * z**2 / shrink**2).sum()) + outside
        # with d >= n the features can fit y exactly: keep n - gamma and the residual positive
        new_alpha = gamma / max(m2, _FLOOR)
        new_beta = max(n - gamma, _FLOOR) / max(residual, _FLOOR)
        converged = abs(new_alpha / new_beta - alpha / beta) <= _TOLERANCE * (alpha / beta)
        alpha, beta = new_alpha, new_beta
        if converged:
            break
    shrink = alpha + beta * sigma
    m2 = float((beta**2 * sigma * z**2 / shrink**2).sum())
    residual = float((alpha**2 * z**2 / shrink**2).sum()) + outside
    # eq. 2: log evidence; F^T F has d - r zero eigenvalues, each adding log(alpha) to the det.
    log_det = float(np.log(shrink).sum()) + (d - len(sigma)) * np.log(alpha)
    evidence = (
        0.5 * n * np.log(beta)
        + 0.5 * d * np.log(alpha)
        - 0.5 * n * np.log(2 * np.pi)
        - 0.5 * beta * residual
        - 0.5 * alpha * m2
        - 0.5 * log_det
    )
    return float(evidence / n)
