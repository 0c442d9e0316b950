"""Regression: one number per text (or text pair: STS-B-style similarity), a head of one output
trained by mean squared error, scored by Spearman and Pearson correlation (and mse, where
lower is better, so it never judges)."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from adaptlab.data.labels import spelled_number
from adaptlab.errors import DataError
from adaptlab.tasks.labelled import LabelledTask, sentence_label
from adaptlab.tasks.registry import register_task
from adaptlab.tasks.task import ScalarTargets

if TYPE_CHECKING:
    import torch

    from adaptlab.data.labels import ParsedLabel
    from adaptlab.data.readers import RawRow
    from adaptlab.tasks.prediction import Prediction


class Regression(ScalarTargets, LabelledTask):
    """A number per example, from a head of one output."""

    name = "regression"
    summary = "a number per text"
    model_kind = "regression"
    primary_metric = "spearman"
    metrics = ("spearman", "pearson")
    paired_metrics = ("spearman", "pearson")
    named_labels = False
    min_labels = 0
    guess_order = 2
    one_number_each = True

    def recognises(self, rows: Sequence[RawRow], separator: str) -> bool:
        numbers = [spelled_number(row.label) for row in rows if isinstance(row.label, str)]
        return all(value is not None for value in numbers) and any(
            value is not None and not value.is_integer() for value in numbers
        )

    def parse_label(self, row: RawRow, separator: str) -> ParsedLabel:
        label = sentence_label(row)
        assert isinstance(label, str)
        value = spelled_number(label)
        if value is None:
            raise DataError(f"{row.where}: label {label!r} is not a number (regression task)")
        return value

    def label_value(self, label: ParsedLabel, index: Any) -> float:
        assert isinstance(label, float)
        return label

    def stratum(self, label: Hashable, outside: Hashable) -> Hashable:
        return None

    def scores(
        self, outputs: np.ndarray, labels: np.ndarray, label_names: Sequence[str]
    ) -> dict[str, float]:
        return regression_metrics(outputs.reshape(-1), labels.reshape(-1))

    def prediction(
        self, text: str, logits: torch.Tensor, marks: torch.Tensor, label_names: Sequence[str]
    ) -> Prediction:
        from adaptlab.tasks.prediction import Prediction

        return Prediction(text, float(logits.reshape(-1)[0]), None)


def regression_metrics(predicted: np.ndarray, gold: np.ndarray) -> dict[str, float]:
    """Spearman and Pearson correlation (0 for constant inputs) and mean squared error."""
    from scipy import stats

    constant = np.ptp(predicted) == 0 or np.ptp(gold) == 0
    spearman = 0.0 if constant else float(stats.spearmanr(predicted, gold).statistic)
    pearson = 0.0 if constant else float(stats.pearsonr(predicted, gold).statistic)
    return {
        "spearman": spearman,
        "pearson": pearson,
        "mse": float(np.mean((predicted - gold) ** 2)),
    }


REGRESSION = register_task(Regression())
