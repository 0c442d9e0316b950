"""A study's results as a ranking is validated against them: the mean fine-tuned test score of
every model, read from the study's results store, and the store keeping the agreement.

`select` sits below `study` (whose `ResultStore` is such a store), so the store is handed in
as the `StudyResults` shape rather than imported.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from adaptlab.errors import DataError
from adaptlab.records.result import RunResult


class StoredRun(Protocol):
    """A done run as a results store gives it."""

    @property
    def result(self) -> RunResult: ...


class StudyResults(Protocol):
    """A study's results store: its done runs, and a place for what `rank --validate` found."""

    path: Path

    def records(self, *, planned_only: bool = False) -> Sequence[StoredRun]: ...

    def save_validation(self, data: str, kind: str, result: dict[str, Any]) -> None: ...


@dataclass(frozen=True)
class FineTuned:
    """Mean test score per model (keyed by built-in name or folder name) and how many runs were
    left out for a NaN or infinite test score (they diverged)."""

    scores: dict[str, float]
    diverged: int


def fine_tuned_scores(study: StudyResults, data_name: str) -> FineTuned:
    """The mean test score per model of the study's planned done runs on `data_name`, each in
    its run's own metric, diverged runs left out; a DataError when no run is left."""
    by_model: dict[str, list[float]] = defaultdict(list)
    diverged = 0
    for stored in study.records(planned_only=True):
        result = stored.result
        if result.data.name != data_name:
            continue
        value = result.test.get(result.metric)
        if value is not None and not math.isfinite(value):
            diverged += 1
        elif value is not None:
            by_model[Path(result.spec.model).name].append(value)
    if not by_model:
        finite = " with a finite test score" if diverged else ""
        raise DataError(f"study store {study.path} holds no finished runs on {data_name!r}{finite}")
    scores = {model: sum(values) / len(values) for model, values in by_model.items()}
    return FineTuned(scores, diverged)
