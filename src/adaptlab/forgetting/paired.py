"""What a probe measures of a model, item by item, and how the base and the adapted model's
measures differ: the forgetting, signed so that a positive value is a loss, with its paired
standard error (the same items scored twice, so their differences carry the error)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from adaptlab.errors import DataError


@dataclass(frozen=True)
class ItemScores:
    """A probe's value of each item for one model (item id -> value), what the values are
    (`measure`), whether higher is better, and other figures of the model on the probe."""

    measure: str
    higher_is_better: bool
    values: Mapping[str, float]
    summary: Mapping[str, float] = field(default_factory=dict)

    def mean(self, items: Sequence[str]) -> float:
        return sum(self.values[item] for item in items) / len(items)


@dataclass(frozen=True)
class Forgetting:
    """One probe's forgetting: the mean of the base's and the adapted model's values over the
    items compared, their mean difference (positive: the adapted model does worse) and the
    standard error of that mean (the differences' sample standard deviation / sqrt(n))."""

    probe: str
    measure: str
    higher_is_better: bool
    items: int
    base: float
    adapted: float
    forgetting: float
    standard_error: float
    details: Mapping[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {
            "probe": self.probe,
            "measure": self.measure,
            "higher_is_better": self.higher_is_better,
            "items": self.items,
            "base": self.base,
            "adapted": self.adapted,
            "forgetting": self.forgetting,
            "standard_error": self.standard_error,
            **dict(self.details),
        }


def paired_forgetting(
    probe: str,
    base: ItemScores,
    adapted: ItemScores,
    items: Sequence[str] | None = None,
    details: Mapping[str, Any] | None = None,
) -> Forgetting:
    """The forgetting on `items` (default: every item the base was scored on), each item's
    difference base - adapted where higher is better, adapted - base where lower is."""
    chosen = list(base.values) if items is None else list(items)
    missing = [item for item in chosen if item not in adapted.values]
    if missing or base.measure != adapted.measure:
        raise DataError(f"probe {probe}: base and adapted model were not scored on the same items")
    if not chosen:
        raise DataError(f"probe {probe}: no items to compare")
    sign = 1.0 if base.higher_is_better else -1.0
    differences = [sign * (base.values[i] - adapted.values[i]) for i in chosen]
    return Forgetting(
        probe=probe,
        measure=base.measure,
        higher_is_better=base.higher_is_better,
        items=len(chosen),
        base=base.mean(chosen),
        adapted=adapted.mean(chosen),
        forgetting=sum(differences) / len(differences),
        standard_error=standard_error(differences),
        details=dict(details or {}),
    )


def standard_error(values: Sequence[float]) -> float:
    """The standard error of the mean of `values` (0 for a single value)."""
    n = len(values)
    if n < 2:
        return 0.0
    mean = sum(values) / n
    variance = sum((v - mean) ** 2 for v in values) / (n - 1)
    return math.sqrt(variance / n)
