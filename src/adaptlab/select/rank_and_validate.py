"""What `adaptlab rank` does, as one call: load the data, rank the candidates, and, given a
study's results, correlate the scores with its fine-tuned scores and keep the agreement there."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from adaptlab.data.loading import load_dataset
from adaptlab.errors import ConfigError
from adaptlab.select.base import Estimator
from adaptlab.select.controls import Candidate
from adaptlab.select.features import POOLINGS
from adaptlab.select.layers import AGGREGATES, Aggregate
from adaptlab.select.rank import FeatureOptions, rank
from adaptlab.select.ranking import Ranking
from adaptlab.select.study_results import StudyResults, fine_tuned_scores
from adaptlab.select.validate import Validation, validate
from adaptlab.tasks.registry import LABELLED

VALIDATED = {"models": "candidates", "layers": "layer candidates"}
"""The kinds of validation a results store keeps, and the candidates each covers."""


@dataclass(frozen=True)
class RankRequest:
    """Candidates and estimators, how features are drawn, how layers are aggregated (`how`),
    and whether every layer is ranked as a candidate of its own (`per_layer`)."""

    candidates: tuple[Candidate, ...]
    estimators: tuple[Estimator, ...]
    options: FeatureOptions = FeatureOptions()
    how: Aggregate = "last"
    per_layer: bool = False

    def __post_init__(self) -> None:
        for option, value, allowed in (
            ("--aggregate", self.how, AGGREGATES),
            ("--pooling", self.options.pooling, POOLINGS),
        ):
            if value not in allowed:
                raise ConfigError(f"{option} is one of {', '.join(allowed)}, got {value!r}")


@dataclass(frozen=True)
class RankReport:
    """The ranking and the seconds it took; with a study, the agreement per kind of candidate
    (`models`, and `layers` with `per_layer`) and how many of its runs were left out for a
    NaN or infinite test score."""

    ranking: Ranking
    seconds: float
    validations: dict[str, Validation] = field(default_factory=dict)
    diverged: int = 0

    def to_dict(self) -> dict[str, Any]:
        """The form `adaptlab rank --json` writes."""
        found: dict[str, Any] = {"ranking": self.ranking.to_dict(), "seconds": self.seconds}
        if self.validations:
            found["validation"] = {kind: v.to_dict() for kind, v in self.validations.items()}
        return found


def rank_and_validate(
    request: RankRequest,
    data: str,
    data_options: dict[str, Any],
    study: StudyResults | None = None,
) -> RankReport:
    """Rank the request's candidates on `data` (loaded with `data_options`); with `study`,
    validate the ranking against its fine-tuned runs on the same data and save the result
    in it (its fine-tuned scores are read first, so a study without them fails before any
    model loads)."""
    dataset = load_dataset(data, LABELLED, **data_options)
    fine_tuned = None if study is None else fine_tuned_scores(study, dataset.name)
    started = time.perf_counter()
    ranking = rank(
        request.candidates,
        dataset,
        request.estimators,
        options=request.options,
        how=request.how,
        per_layer=request.per_layer,
    )
    seconds = time.perf_counter() - started
    if study is None or fine_tuned is None:
        return RankReport(ranking, seconds)
    scores = fine_tuned.scores
    validations = {"models": validate(ranking, ranking.rows, scores, VALIDATED["models"])}
    if request.per_layer:
        validations["layers"] = validate(ranking, ranking.layer_rows, scores, VALIDATED["layers"])
    for kind, validation in validations.items():
        study.save_validation(dataset.name, kind, validation.to_dict())
    return RankReport(ranking, seconds, validations, fine_tuned.diverged)
