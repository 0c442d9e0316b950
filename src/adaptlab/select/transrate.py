"""TransRate: the mutual information of features and labels as a difference of coding rates.

Huang, Huang, Xiao, Chen and Hu 2022, "Frustratingly Easy Transferability Estimation" (ICML),
§3 eq. 4-6: TrR = R(Z, eps) - R(Z, eps | Y), with the coding rate (Ma et al. 2007)
R(Z, eps) = 1/2 logdet(I + d / (n eps^2) Z^T Z) and R(Z, eps | Y) = sum_k (n_k / n) R(Z_k, eps).
Features are centred and scaled to unit mean squared norm first, so the score does not depend on
the feature scale.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from adaptlab.errors import ConfigError
from adaptlab.select.base import Estimator, Floats, Target, unit_scale


@dataclass
class TransRate(Estimator):
    """Coding rate of all features minus the class-weighted coding rate within classes."""

    eps: float = 1e-1
    name = "transrate"

    def __post_init__(self) -> None:
        if self.eps <= 0:
            raise ConfigError(f"transrate: eps must be positive, got {self.eps}")

    def _score(self, x: Floats, target: Target) -> float:
        z = unit_scale(x)
        if z is None:
            return 0.0  # constant features: no information about the labels
        return coding_rate(z, self.eps) - within_class_rate(z, target, self.eps)


def within_class_rate(z: Floats, target: Target, eps: float) -> float:
    """R(Z, eps | Y) = sum_k (n_k / n) R(Z_k, eps): the class-weighted coding rate."""
    classes, n = target.classes, len(z)
    return float(
        sum(
            (classes == k).sum() / n * coding_rate(z[classes == k], eps)
            for k in range(target.class_count)
        )
    )


def coding_rate(z: Floats, eps: float) -> float:
    """1/2 logdet(I + d / (n eps^2) Z^T Z), on the smaller of the d x d and n x n Gram sides."""
    n, d = z.shape
    gram = z.T @ z if n > d else z @ z.T  # det(I + c Z^T Z) = det(I + c Z Z^T)
    _, log_det = np.linalg.slogdet(np.eye(len(gram)) + d / (n * eps**2) * gram)
    return 0.5 * float(log_det)
