"""Results per class: how many examples of each class a training sample holds, and per test
class its support, how often it was predicted and how often rightly. What a class is belongs
to the task (`Task.class_names`): a label, a label of a set, an entity type."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class ClassCounts:
    """One class on the test split: gold examples (support), predictions, correct predictions."""

    label: str
    support: int
    predicted: int
    correct: int

    @property
    def precision(self) -> float:
        return self.correct / self.predicted if self.predicted else 0.0

    @property
    def recall(self) -> float:
        return self.correct / self.support if self.support else 0.0

    @property
    def f1(self) -> float:
        total = self.predicted + self.support
        return 2 * self.correct / total if total else 0.0

    def to_dict(self) -> dict[str, object]:
        return {
            "label": self.label,
            "support": self.support,
            "predicted": self.predicted,
            "correct": self.correct,
        }


def class_counts(
    names: Sequence[str], support: Sequence[int], predicted: Sequence[int], correct: Sequence[int]
) -> tuple[ClassCounts, ...]:
    """One `ClassCounts` per name from three parallel sequences of counts."""
    return tuple(
        ClassCounts(name, int(support[i]), int(predicted[i]), int(correct[i]))
        for i, name in enumerate(names)
    )
