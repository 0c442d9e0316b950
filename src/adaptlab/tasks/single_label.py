"""Single-label classification: one class per text (or text pair), scored by accuracy, macro
and micro F1 and the Matthews correlation (multi-class form, Gorodkin 2004).

The judging metric is accuracy, except on data whose largest class in the training sample is
more than `IMBALANCE_RATIO` times its smallest: there accuracy rewards a model that ignores
the small classes, so macro-F1 (every class counts the same) judges instead.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from adaptlab.data.labels import natural_key, refuse_numeric_classes, spells_nan
from adaptlab.errors import DataError
from adaptlab.tasks.classes import ClassCounts, class_counts
from adaptlab.tasks.judging import MetricChoice, class_spread
from adaptlab.tasks.labelled import LabelledTask, sentence_label
from adaptlab.tasks.registry import register_task
from adaptlab.tasks.task import misfit

if TYPE_CHECKING:
    import torch

    from adaptlab.data.labels import ParsedLabel
    from adaptlab.data.readers import RawRow
    from adaptlab.data.types import Example
    from adaptlab.tasks.prediction import Prediction

IMBALANCE_RATIO = 3.0
"""Largest / smallest training class above which single-label data is judged by macro-F1."""
BALANCED_METRIC = "macro_f1"


class SingleLabel(LabelledTask):
    """One class per example, from a softmax over the labels."""

    name = "single_label"
    summary = "one class per text"
    model_kind = "single_label"
    primary_metric = "accuracy"
    metrics = ("accuracy", "macro_f1", "micro_f1", "mcc")
    paired_metrics = ("accuracy", "macro_f1")
    class_unit = "examples"
    one_class_each = True
    min_labels = 2
    stratified_by = "stratified by label"
    guess_order = 3  # what labels are when they are nothing else

    def recognises(self, rows: Sequence[RawRow], separator: str) -> bool:
        return True

    def check_guess(self, rows: Sequence[RawRow], label_column: str) -> None:
        refuse_numeric_classes(rows, label_column)

    def parse_label(self, row: RawRow, separator: str) -> ParsedLabel:
        label = sentence_label(row)
        assert isinstance(label, str)
        if not label:
            raise DataError(f"{row.where} has an empty label; fill it in or drop the row")
        if spells_nan(label):
            raise DataError(
                f"{row.where} has label {label!r}, a missing value rather than a class; fill it "
                "in or drop the row"
            )
        return label

    def label_order(self, names: Iterable[str]) -> tuple[str, ...]:
        return tuple(sorted(set(names), key=natural_key))

    def target(self, label: Any, label_count: int) -> int:
        if not isinstance(label, int):
            raise misfit(label, self.name)
        return class_id(label, label_count)

    def label_tensor(self, labels: list[Any], longest: int, left: bool) -> torch.Tensor:
        import torch

        return torch.tensor(labels, dtype=torch.long)

    def scores(
        self, outputs: np.ndarray, labels: np.ndarray, label_names: Sequence[str]
    ) -> dict[str, float]:
        return classification_metrics(outputs.argmax(-1), labels, outputs.shape[-1])

    def training_counts(
        self, examples: Sequence[Example], label_names: Sequence[str]
    ) -> dict[str, int]:
        counts = Counter(label_names[int(example.label)] for example in examples)  # type: ignore[arg-type]
        return {name: counts[name] for name in label_names}

    def evaluated_counts(
        self, outputs: np.ndarray, labels: np.ndarray, label_names: Sequence[str]
    ) -> tuple[ClassCounts, ...]:
        predicted = outputs.argmax(-1)
        classes = np.arange(len(label_names))
        support = (labels[:, None] == classes).sum(0)
        guessed = (predicted[:, None] == classes).sum(0)
        right = ((labels == predicted)[:, None] & (labels[:, None] == classes)).sum(0)
        return class_counts(label_names, support, guessed, right)

    def choose_metric(self, train_counts: Mapping[str, int] | None) -> MetricChoice:
        primary = self.primary_metric
        if train_counts is None:
            return MetricChoice(primary, "the task's primary metric; no class counts were recorded")
        spread = class_spread(train_counts)
        if spread is None:
            return MetricChoice(primary, "the task's primary metric")
        if spread.ratio > IMBALANCE_RATIO:
            return MetricChoice(
                BALANCED_METRIC,
                f"{spread.describe()}, and accuracy would reward ignoring the small classes",
            )
        return MetricChoice(
            primary,
            f"the task's primary metric; its classes are balanced (largest within "
            f"{IMBALANCE_RATIO:g}x the smallest in the training sample)",
        )

    def prediction(
        self, text: str, logits: torch.Tensor, marks: torch.Tensor, label_names: Sequence[str]
    ) -> Prediction:
        from adaptlab.tasks.prediction import Prediction

        probs = logits.softmax(-1)
        best = int(probs.argmax())
        return Prediction(text, label_names[best], float(probs[best]))


def class_id(value: int, label_count: int) -> int:
    """A class id, checked against `label_count`."""
    if not 0 <= value < label_count:
        raise DataError(
            f"label id {value} is outside 0..{label_count - 1}; "
            "check label_count against the dataset's label names"
        )
    return value


def classification_metrics(
    predicted: np.ndarray, gold: np.ndarray, classes: int
) -> dict[str, float]:
    """Accuracy, macro F1, micro F1 and Matthews correlation of class predictions."""
    confusion = np.zeros((classes, classes), dtype=np.float64)
    np.add.at(confusion, (gold, predicted), 1)
    true_pos = np.diag(confusion)
    predicted_count, gold_count = confusion.sum(0), confusion.sum(1)
    with np.errstate(divide="ignore", invalid="ignore"):
        f1 = np.where(
            predicted_count + gold_count > 0, 2 * true_pos / (predicted_count + gold_count), 0.0
        )
    present = gold_count + predicted_count > 0
    total = confusion.sum()
    accuracy = true_pos.sum() / total if total else 0.0
    return {
        "accuracy": float(accuracy),
        "macro_f1": float(f1[present].mean()) if present.any() else 0.0,
        "micro_f1": float(accuracy),  # single-label: micro F1 equals accuracy
        "mcc": matthews(confusion),
    }


def matthews(confusion: np.ndarray) -> float:
    """Multi-class Matthews correlation from a confusion matrix; 0 when undefined."""
    total = confusion.sum()
    correct = np.trace(confusion)
    predicted, gold = confusion.sum(0), confusion.sum(1)
    numerator = correct * total - gold @ predicted
    denominator = np.sqrt((total**2 - predicted @ predicted) * (total**2 - gold @ gold))
    return float(numerator / denominator) if denominator > 0 else 0.0


SINGLE_LABEL = register_task(SingleLabel())
