"""Results per class: how many examples of each class a training sample holds, and per test
class its support, how often it was predicted and how often rightly.

The classes are the labels of single-label and multi-label data, and the entity types of token
(BIO) data, where a class's examples are its entity spans. Regression has none.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from adaptlab.data import Example
from adaptlab.tasks import TaskKind
from adaptlab.train.metrics import Span, bio_spans, entity_spans


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


def class_names(task: TaskKind, label_names: Sequence[str]) -> tuple[str, ...]:
    """The classes counted for `task`: the labels, or the entity types of BIO tags."""
    if task == "regression":
        return ()
    if task != "token":
        return tuple(label_names)
    types = (tag.partition("-")[2] for tag in label_names if tag[:2] in ("B-", "I-"))
    return tuple(dict.fromkeys(types))


def training_counts(
    task: TaskKind, examples: Sequence[Example], label_names: Sequence[str]
) -> dict[str, int] | None:
    """Examples per class in `examples` (entity spans for token data); None for regression."""
    if task == "regression":
        return None
    counts: Counter[str] = Counter()
    for example in examples:
        label = example.label
        if task == "single_label":
            counts[label_names[int(label)]] += 1  # type: ignore[arg-type]
        elif task == "multi_label":
            counts.update(label_names[i] for i in label)  # type: ignore[union-attr]
        else:
            tags = [label_names[i] for i in label]  # type: ignore[union-attr]
            counts.update(kind for _, _, kind in bio_spans(tags))
    return {name: counts[name] for name in class_names(task, label_names)}


def evaluated_counts(
    task: TaskKind, outputs: np.ndarray, labels: np.ndarray, label_names: Sequence[str]
) -> tuple[ClassCounts, ...] | None:
    """Per class: support, predicted and correct on evaluated outputs (logits, as `evaluate`
    returns them); None for regression."""
    if task == "regression":
        return None
    names = class_names(task, label_names)
    if task == "single_label":
        predicted = outputs.argmax(-1)
        classes = np.arange(len(names))
        support = (labels[:, None] == classes).sum(0)
        guessed = (predicted[:, None] == classes).sum(0)
        right = ((labels == predicted)[:, None] & (labels[:, None] == classes)).sum(0)
    elif task == "multi_label":
        gold, chosen = labels.astype(bool), outputs > 0
        support, guessed, right = gold.sum(0), chosen.sum(0), (gold & chosen).sum(0)
    else:
        gold_spans, predicted_spans = entity_spans(outputs.argmax(-1), labels, label_names)
        support = _per_type(gold_spans, names)
        guessed = _per_type(predicted_spans, names)
        right = _per_type(gold_spans & predicted_spans, names)
    return tuple(
        ClassCounts(name, int(support[i]), int(guessed[i]), int(right[i]))
        for i, name in enumerate(names)
    )


def _per_type(spans: set[Span], names: Sequence[str]) -> list[int]:
    found = Counter(kind for *_, kind in spans)
    return [found[name] for name in names]
