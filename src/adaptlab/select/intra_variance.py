"""Intra-class feature variance, the quantity TMI measures transferability with.

Xu and Kang 2023, "Fast and Accurate Transferability Measurement by Evaluating Intra-class
Feature Variance" (ICCV): a model transfers well when the features of each target class still
vary, i.e. the pre-trained model has not collapsed the class to a point and fine-tuning has room
to adapt it. The variance is measured as the class-weighted coding rate (the entropy of a
Gaussian, up to constants) of each class's features, after centring and scaling all features to
unit mean squared norm so models of any width and scale compare. Higher is better, as in TMI.

Unlike the discriminative estimators, this score does not fall when labels are shuffled:
shuffling spreads every class over the whole feature cloud, which raises intra-class variance.
"""

from __future__ import annotations

from dataclasses import dataclass

from adaptlab.errors import ConfigError
from adaptlab.select.base import Estimator, Floats, Target, unit_scale
from adaptlab.select.transrate import within_class_rate


@dataclass
class IntraClassVariance(Estimator):
    """Class-weighted coding rate of each class's (globally normalised) features."""

    eps: float = 1e-1
    name = "intra-variance"

    def __post_init__(self) -> None:
        if self.eps <= 0:
            raise ConfigError(f"intra-variance: eps must be positive, got {self.eps}")

    def _score(self, x: Floats, target: Target) -> float:
        z = unit_scale(x)
        if z is None:
            return 0.0  # constant features: no variance anywhere
        return within_class_rate(z, target, self.eps)
