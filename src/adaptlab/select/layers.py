"""Layer aggregation: score the last layer, the best layer, or the mean of the layers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

import numpy as np

from adaptlab.errors import ConfigError
from adaptlab.select.base import Estimator
from adaptlab.select.features import LayerFeatures

Aggregate = Literal["last", "best", "mean"]
AGGREGATES: tuple[str, ...] = get_args(Aggregate)


@dataclass(frozen=True)
class LayerScore:
    """An estimator's score for one candidate, and the layer it came from (None: mean)."""

    score: float
    layer: int | None


def layer_scores(features: LayerFeatures, estimator: Estimator) -> list[float]:
    """The estimator's score on every layer, 0 (embeddings) to the last block."""
    return [estimator.score(layer, features.labels) for layer in features.hidden]


def aggregate(
    features: LayerFeatures,
    estimator: Estimator,
    how: Aggregate,
    per_layer: list[float] | None = None,
) -> LayerScore:
    """`last`: the last layer's features; `best`: the best block (1..L) by this estimator;
    `mean`: features averaged over the blocks 1..L, then scored."""
    if how not in AGGREGATES:
        raise ConfigError(
            f"unknown layer aggregation {how!r}; choose one of {', '.join(AGGREGATES)}"
        )
    last = features.layer_count
    if how == "last":
        if per_layer is not None:
            return LayerScore(per_layer[last], last)
        return LayerScore(estimator.score(features.hidden[last], features.labels), last)
    if how == "mean":
        mean = features.hidden[1:].mean(axis=0)
        return LayerScore(estimator.score(mean, features.labels), None)
    scores = per_layer if per_layer is not None else layer_scores(features, estimator)
    best = 1 + int(np.argmax(scores[1:]))
    return LayerScore(scores[best], best)
