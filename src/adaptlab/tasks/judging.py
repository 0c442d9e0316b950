"""What is said of the metric that judges a method on a data set: the metric and why, in one
line (`MetricChoice`, made by `Task.choose_metric` or asked for by name), when two of its
scores tie, the spread of a training sample's classes, and the refusal of a metric the runs
did not compute."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from adaptlab.errors import ConfigError


@dataclass(frozen=True)
class MetricChoice:
    """The metric that judges, and the reason, as a clause: `set by ...`, `the largest ...`."""

    metric: str
    reason: str


def scores_tie(a: float, b: float) -> bool:
    """Whether two scores are equal up to floating-point noise (relative 1e-9, absolute 1e-12):
    13/30 computed two ways ties, so float rounding never decides between epochs or methods,
    while one example in a million still tells two scores apart."""
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


def beats(a: float, b: float) -> bool:
    """Whether score `a` is better than `b` (higher is better) and not tied with it."""
    return a > b and not scores_tie(a, b)


@dataclass(frozen=True)
class ClassSpread:
    """The largest and smallest class of a training sample, by number of examples."""

    largest: str
    largest_count: int
    smallest: str
    smallest_count: int

    @property
    def ratio(self) -> float:
        """Largest / smallest count; infinite when a class has no example."""
        if self.smallest_count == 0:
            return math.inf
        return self.largest_count / self.smallest_count

    def describe(self) -> str:
        """`the largest class of the training sample (earn, 397 examples) is 33.1x its
        smallest (grain, 12)`."""
        if self.smallest_count == 0:
            return (
                f"class {self.smallest} has no example in the training sample while "
                f"{self.largest} has {self.largest_count:,}"
            )
        return (
            f"the largest class of the training sample ({self.largest}, "
            f"{self.largest_count:,} examples) is {self.ratio:.1f}x its smallest "
            f"({self.smallest}, {self.smallest_count:,})"
        )


def class_spread(counts: Mapping[str, int]) -> ClassSpread | None:
    """Largest and smallest class of `counts` (ties: the first listed); None below 2 classes."""
    if len(counts) < 2:
        return None
    names = list(counts)
    largest = max(names, key=lambda name: counts[name])
    smallest = min(names, key=lambda name: counts[name])
    return ClassSpread(largest, counts[largest], smallest, counts[smallest])


def require_metric(metric: str, computed: Iterable[str], data: str, task: str) -> None:
    """A metric the runs of `data` did not compute is a one-line error naming those they did."""
    names = list(computed)
    if metric not in names:
        raise ConfigError(
            f"metric {metric!r} is not computed on {data} ({task} data gives "
            f"{', '.join(names)}); set `metric:` to one of them"
        )
