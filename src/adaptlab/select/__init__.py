"""Transferability estimation: rank pretrained models and layers for a data set without
fine-tuning each (LogME, H-score, NLEEP, kNN, GBC, TransRate, intra-class variance).
See docs/select.md."""

from typing import TYPE_CHECKING

from adaptlab.lazy import lazy_face

if TYPE_CHECKING:
    from adaptlab.select.base import Estimator, check_inputs
    from adaptlab.select.controls import Candidate, load_candidate, parse_candidate, write_candidate
    from adaptlab.select.features import POOLINGS, LayerFeatures, extract, sample_examples
    from adaptlab.select.layers import AGGREGATES, aggregate, layer_scores
    from adaptlab.select.rank import FeatureOptions, rank
    from adaptlab.select.ranking import Ranking, RankRow
    from adaptlab.select.registry import ESTIMATORS, make_estimators
    from adaptlab.select.validate import Agreement, Validation, agreement, validate

__all__ = [
    "AGGREGATES",
    "ESTIMATORS",
    "POOLINGS",
    "Agreement",
    "Candidate",
    "Estimator",
    "FeatureOptions",
    "LayerFeatures",
    "RankRow",
    "Ranking",
    "Validation",
    "aggregate",
    "agreement",
    "check_inputs",
    "extract",
    "layer_scores",
    "load_candidate",
    "make_estimators",
    "parse_candidate",
    "rank",
    "sample_examples",
    "validate",
    "write_candidate",
]

lazy_face(__name__)
