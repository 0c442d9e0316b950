"""Per-class numbers of the report: each method's best run class by class, and the class
distribution of the training sample (how skewed, how many rare classes, test classes never
seen in training). Pure functions over runs, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from adaptlab.report.aggregate import Cell, best_run, runs_of, scored
from adaptlab.report.records import Run, Setting
from adaptlab.tasks.classes import ClassCounts
from adaptlab.tasks.judging import ClassSpread, class_spread

RARE_BELOW = 5
"""A class with fewer training examples than this is called rare."""


@dataclass(frozen=True)
class ClassRow:
    """One class: test support, training examples, and each method's counts (aligned with the
    table's methods; None where that run recorded none)."""

    label: str
    support: int
    train: int | None
    counts: tuple[ClassCounts | None, ...]

    @property
    def never_predicted(self) -> bool:
        """No method's best run ever predicts this class."""
        return all(c is None or c.predicted == 0 for c in self.counts)


@dataclass(frozen=True)
class ClassTable:
    """Per-class results of the best run of each method in one setting, by support."""

    setting: Setting
    methods: tuple[str, ...]
    runs: tuple[Run, ...]
    rows: tuple[ClassRow, ...]


@dataclass(frozen=True)
class Imbalance:
    """The class distribution of one setting's training sample."""

    setting: Setting
    seed: int
    total: int
    counts: Mapping[str, int]
    same_for_every_seed: bool
    spread: ClassSpread | None
    rare: tuple[str, ...]
    unseen: tuple[str, ...] | None
    """Test classes with support that have no training example; None without test counts."""


def class_table(cells: Sequence[Cell], runs: Sequence[Run]) -> ClassTable | None:
    """The table of one setting's chosen cells (one per method, leaving out methods whose
    every run diverged); None when no best run recorded per-class counts (results of an
    adaptlab that did not, or regression)."""
    cells = scored(cells)
    best = [best_run(runs_of(runs, cell), cell.metric) for cell in cells]
    counted = [r for r in best if r.test_classes]
    if not counted:
        return None
    training = _sample(runs_of_setting(runs, cells[0].setting))
    train_counts = training.train_counts if training is not None else None
    labels = [c.label for c in counted[0].test_classes or ()]
    per_run = [{c.label: c for c in r.test_classes or ()} for r in best]
    rows = [
        ClassRow(
            label=label,
            support=next(found[label].support for found in per_run if label in found),
            train=train_counts.get(label) if train_counts is not None else None,
            counts=tuple(found.get(label) for found in per_run),
        )
        for label in labels
    ]
    rows.sort(key=lambda row: -row.support)  # stable: ties keep the data set's label order
    return ClassTable(
        setting=cells[0].setting,
        methods=tuple(cell.method for cell in cells),
        runs=tuple(best),
        rows=tuple(rows),
    )


def imbalance(runs: Sequence[Run]) -> Imbalance | None:
    """The training distribution of one setting's runs (the lowest seed's sample); None when
    no run recorded one."""
    sample = _sample(runs)
    if sample is None or sample.train_counts is None:
        return None
    counts = dict(sample.train_counts)
    recorded = [dict(r.train_counts) for r in runs if r.train_counts is not None]
    tested = next((r.test_classes for r in runs if r.test_classes), None)
    unseen = None
    if tested is not None:
        unseen = tuple(c.label for c in tested if c.support and not counts.get(c.label))
    return Imbalance(
        setting=sample.setting,
        seed=sample.seed,
        total=sum(counts.values()),
        counts=counts,
        same_for_every_seed=all(found == counts for found in recorded),
        spread=class_spread(counts),
        rare=tuple(name for name, count in counts.items() if count < RARE_BELOW),
        unseen=unseen,
    )


def runs_of_setting(runs: Sequence[Run], setting: Setting) -> list[Run]:
    return [r for r in runs if r.setting == setting]


def _sample(runs: Sequence[Run]) -> Run | None:
    """The run whose training sample the report describes: the lowest seed that has one."""
    counted = [r for r in runs if r.train_counts is not None]
    return min(counted, key=lambda r: r.seed) if counted else None
