"""Classes with fewer examples than the chosen estimators need: refused before any model loads,
saying what can run on the data, or (on request) left out of the sample.

Each estimator states its minimum per class (`Estimator.needed_per_class`): below it the
score says nothing (it would be the same for every model).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

from adaptlab.data.types import Dataset, Example
from adaptlab.errors import ConfigError, DataError
from adaptlab.select.base import Estimator
from adaptlab.tasks.registry import get_task

DROP_OPTION = "--drop-rare-classes"


@dataclass(frozen=True)
class Dropped:
    """The classes left out of a sample for having fewer than `below` examples in it, each
    with the examples it had."""

    below: int
    classes: tuple[tuple[str, int], ...]

    @property
    def examples(self) -> int:
        return sum(count for _, count in self.classes)

    def describe(self, kept: int) -> str:
        """`left out 3 examples of 2 classes with fewer than 6 examples ('a' 1, 'b' 2); 95
        examples scored`."""
        names = ", ".join(f"{name!r} {count}" for name, count in self.classes)
        return (
            f"left out {_count(self.examples, 'example')} of "
            f"{_count(len(self.classes), 'class', 'classes')} with fewer than {self.below} "
            f"examples ({names}); {_count(kept, 'example')} scored"
        )

    def to_dict(self) -> dict[str, Any]:
        """`{"below": 6, "classes": [["a", 1], ["b", 2]]}`."""
        return {"below": self.below, "classes": [[name, count] for name, count in self.classes]}


def _count(n: int, one: str, many: str | None = None) -> str:
    return f"{n} {one if n == 1 else many or one + 's'}"


def needed(estimators: Sequence[Estimator]) -> int:
    """Examples of every class that all `estimators` need."""
    return max(estimator.needed_per_class() for estimator in estimators)


def class_counts(examples: Sequence[Example]) -> Counter[int]:
    """Examples per class id."""
    return Counter(int(cast(int, example.label)) for example in examples)


def check_sample(
    examples: Sequence[Example], dataset: Dataset, estimators: Sequence[Estimator]
) -> None:
    """Refuse a sample too small for an estimator: one with fewer examples of some class than
    the estimator needs to say anything. The message names what each estimator needs, whether
    a larger --sample can help, which estimators can run on the sample as it is, and the
    option that leaves the rare classes out."""
    if not get_task(dataset.task).one_class_each:
        return
    counts = class_counts(examples)
    label, smallest = min(counts.items(), key=lambda item: (item[1], item[0]))
    short: dict[int, list[str]] = {}
    for estimator in estimators:
        if smallest < estimator.needed_per_class():
            short.setdefault(estimator.needed_per_class(), []).append(estimator.name)
    if not short:
        return
    needs = "; ".join(
        f"{', '.join(names)} need{'s' if len(names) == 1 else ''} {n}"
        for n, names in sorted(short.items())
    )
    runnable = [e.name for e in estimators if e.needed_per_class() <= smallest]
    can_run = (
        f"only {', '.join(runnable)} can run on it (--estimators {','.join(runnable)})"
        if runnable
        else "no estimator can run on it as it is"
    )
    advice = [_larger_sample(dataset, estimators), can_run]
    least = needed(estimators)
    if sum(count >= least for count in counts.values()) >= 2:  # dropping leaves a ranking
        advice.append(f"or pass {DROP_OPTION} to leave out classes of fewer than {least} examples")
    raise DataError(
        f"a sample of {len(examples)} examples has {smallest} of class "
        f"{dataset.label_names[label]!r}, too few for a score that says anything ({needs} "
        f"examples of every class); " + "; ".join(advice)
    )


def _larger_sample(dataset: Dataset, estimators: Sequence[Estimator]) -> str:
    """Whether a larger --sample can give every class what the estimators need."""
    train = dataset.splits["train"]
    label, smallest = min(class_counts(train).items(), key=lambda item: (item[1], item[0]))
    if smallest >= needed(estimators):
        return f"raise --sample (0 takes all {len(train)} training examples)"
    return (
        f"a larger --sample cannot help: all {len(train)} training examples hold {smallest} "
        f"of class {dataset.label_names[label]!r}"
    )


def drop_rare_classes(
    examples: Sequence[Example], dataset: Dataset, estimators: Sequence[Estimator]
) -> tuple[tuple[Example, ...], Dropped]:
    """`examples` without the classes that have fewer than the estimators need in them, and
    what was left out; a DataError when fewer than 2 classes would remain (nothing to rank
    by), a ConfigError for data without classes."""
    if not get_task(dataset.task).one_class_each:
        raise ConfigError(
            f"{DROP_OPTION} leaves out classes, and {dataset.name} is {dataset.task} data"
        )
    below = needed(estimators)
    counts = class_counts(examples)
    rare = sorted(label for label, count in counts.items() if count < below)
    kept = tuple(e for e in examples if int(cast(int, e.label)) not in rare)
    left = len(counts) - len(rare)
    if left < 2:
        raise DataError(
            f"leaving out the classes with fewer than {below} examples leaves {left} of the "
            f"sample's {len(counts)} classes, and a score needs 2; raise --sample, or keep to "
            "estimators that need fewer examples of every class (--estimators)"
        )
    dropped = tuple((dataset.label_names[label], counts[label]) for label in rare)
    return kept, Dropped(below, dropped)
