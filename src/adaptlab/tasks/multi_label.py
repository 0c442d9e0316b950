"""Multi-label classification: a set of labels per text (MultiEURLEX, the slides' EuroVoc
concepts), a sigmoid per label, scored by mean R-Precision (the slides' measure) and micro F1
at score > 0 (p > 0.5)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from adaptlab.data.labels import natural_key
from adaptlab.tasks.classes import ClassCounts, class_counts
from adaptlab.tasks.labelled import LabelledTask, sentence_label
from adaptlab.tasks.registry import register_task
from adaptlab.tasks.single_label import class_id
from adaptlab.tasks.task import misfit

if TYPE_CHECKING:
    import torch

    from adaptlab.data.labels import ParsedLabel
    from adaptlab.data.readers import RawRow
    from adaptlab.data.types import Example
    from adaptlab.tasks.prediction import Prediction


class MultiLabel(LabelledTask):
    """Any number of labels per example, each from its own sigmoid."""

    name = "multi_label"
    summary = "a set of labels per text"
    model_kind = "multi_label"
    primary_metric = "mean_rprecision"
    metrics = ("mean_rprecision", "micro_f1")
    paired_metrics = ("mean_rprecision", "micro_f1")
    class_unit = "label assignments"
    stratified_by = "stratified by label set"
    guess_order = 1

    def recognises(self, rows: Sequence[RawRow], separator: str) -> bool:
        return any(isinstance(row.label, tuple) or separator in row.label for row in rows)

    def parse_label(self, row: RawRow, separator: str) -> ParsedLabel:
        label = sentence_label(row, sets=True)
        parts = label if isinstance(label, tuple) else label.split(separator)
        return tuple(sorted({part.strip() for part in parts if part.strip()}))

    def label_order(self, names: Iterable[str]) -> tuple[str, ...]:
        return tuple(sorted(set(names), key=natural_key))

    def label_value(self, label: ParsedLabel, index: Mapping[str, int]) -> tuple[int, ...]:
        assert isinstance(label, tuple)
        return tuple(sorted(index[name] for name in label))

    def placeholder(self, text: str) -> Example:
        from adaptlab.data.types import Example

        return Example(text=text, label=())

    def target(self, label: Any, label_count: int) -> list[float]:
        if not isinstance(label, tuple):
            raise misfit(label, self.name)
        hot = [0.0] * label_count
        for value in label:
            hot[class_id(value, label_count)] = 1.0
        return hot

    def scores(
        self, outputs: np.ndarray, labels: np.ndarray, label_names: Sequence[str]
    ) -> dict[str, float]:
        return multi_label_metrics(outputs, labels)

    def training_counts(
        self, examples: Sequence[Example], label_names: Sequence[str]
    ) -> dict[str, int]:
        counts = Counter(label_names[i] for example in examples for i in example.label)  # type: ignore[union-attr]
        return {name: counts[name] for name in label_names}

    def evaluated_counts(
        self, outputs: np.ndarray, labels: np.ndarray, label_names: Sequence[str]
    ) -> tuple[ClassCounts, ...]:
        gold, chosen = labels.astype(bool), outputs > 0
        return class_counts(label_names, gold.sum(0), chosen.sum(0), (gold & chosen).sum(0))

    def prediction(
        self, text: str, logits: torch.Tensor, marks: torch.Tensor, label_names: Sequence[str]
    ) -> Prediction:
        from adaptlab.tasks.prediction import Prediction

        probs = logits.sigmoid()
        chosen = [label_names[i] for i in range(len(probs)) if probs[i] > 0.5]
        return Prediction(text, chosen, [round(float(p), 6) for p in probs])


def multi_label_metrics(scores: np.ndarray, gold: np.ndarray) -> dict[str, float]:
    """Mean R-Precision over examples with labels, and micro F1 at score > 0 (p > 0.5)."""
    gold = gold.astype(bool)
    precisions = []
    for row_scores, row_gold in zip(scores, gold, strict=True):
        r = int(row_gold.sum())
        if r:
            top = np.argsort(-row_scores, kind="stable")[:r]
            precisions.append(row_gold[top].mean())
    predicted = scores > 0
    true_pos = float((predicted & gold).sum())
    denominator = float(predicted.sum() + gold.sum())
    return {
        "mean_rprecision": float(np.mean(precisions)) if precisions else 0.0,
        "micro_f1": 2 * true_pos / denominator if denominator else 0.0,
    }


MULTI_LABEL = register_task(MultiLabel())
