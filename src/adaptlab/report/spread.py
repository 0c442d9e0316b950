"""Means and spreads over seeds that leave out a diverged run's NaN or infinite value, and the
text that says how many were left out; the report's only arithmetic on stored numbers."""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence

import adaptlab.report.formatting as fmt

DIVERGED = "diverged"
"""How the report writes a value that is NaN or infinite: the run's training diverged."""


def finite(values: Iterable[float | None]) -> list[float]:
    """The values that are numbers, neither NaN nor infinite."""
    return [v for v in values if v is not None and math.isfinite(v)]


def mean_std(values: Iterable[float | None]) -> tuple[float, float]:
    """Mean and sample standard deviation (ddof=1; 0 for a single value) of the finite values;
    NaN and NaN when there are none."""
    kept = finite(values)
    if not kept:
        return math.nan, math.nan
    return statistics.fmean(kept), statistics.stdev(kept) if len(kept) > 1 else 0.0


def mean(values: Iterable[float | None]) -> float:
    """Mean of the finite values (NaN when there are none)."""
    return mean_std(values)[0]


def spread_text(values: Sequence[float], signed: bool = False) -> str:
    """`mean ± std` of the finite values (with the sign if `signed`), followed by how many
    values were left out; `diverged` when no value is finite."""
    kept = finite(values)
    if not kept:
        return DIVERGED
    centre, std = mean_std(kept)
    text = f"{centre:+.3f} ± {std:.3f}" if signed else fmt.score_pm(centre, std)
    left = len(values) - len(kept)
    return text + (f" ({left} {DIVERGED}, left out)" if left else "")
