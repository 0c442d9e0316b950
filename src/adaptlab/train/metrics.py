"""Evaluation metrics for each task kind, computed with numpy from predictions and labels.

single_label: accuracy, macro / micro F1, Matthews correlation (multi-class form, Gorodkin
2004); token: span F1 over BIO entities (exact type and boundary match, as conlleval);
regression: Spearman and Pearson correlation; multi_label: mean R-Precision (MultiEURLEX
slides), micro F1 at threshold 0.5.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy import stats

from adaptlab.tasks import TaskKind

PRIMARY_METRIC: dict[str, str] = {
    "single_label": "accuracy",
    "multi_label": "mean_rprecision",
    "token": "span_f1",
    "regression": "spearman",
}
"""The metric that picks the best epoch, per task kind."""

METRICS: dict[str, tuple[str, ...]] = {
    "single_label": ("accuracy", "macro_f1", "micro_f1", "mcc"),
    "multi_label": ("mean_rprecision", "micro_f1"),
    "token": ("span_f1", "span_precision", "span_recall", "token_accuracy"),
    "regression": ("spearman", "pearson"),
}
"""The metrics of each task kind where higher is better (regression's mse is left out): the
ones a study may judge methods by."""

PAIRED_METRIC: dict[str, tuple[str, str]] = {
    "single_label": ("accuracy", "macro_f1"),
    "multi_label": ("mean_rprecision", "micro_f1"),
    "token": ("span_f1", "token_accuracy"),
    "regression": ("spearman", "pearson"),
}
"""The two metrics shown side by side for each task kind."""


def second_metric(task: str, metric: str) -> str:
    """The metric shown beside `metric`: the other of the task's pair, or the pair's first."""
    first, second = PAIRED_METRIC[task]
    return second if metric == first else first


def compute_metrics(
    task: TaskKind, outputs: np.ndarray, labels: np.ndarray, label_names: Sequence[str] = ()
) -> dict[str, float]:
    """Metrics for `task`; `outputs` are logits (scores for multi_label, values for regression)."""
    if task == "single_label":
        return classification_metrics(outputs.argmax(-1), labels, outputs.shape[-1])
    if task == "multi_label":
        return multi_label_metrics(outputs, labels)
    if task == "regression":
        return regression_metrics(outputs.reshape(-1), labels.reshape(-1))
    return token_metrics(outputs.argmax(-1), labels, label_names)


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


def regression_metrics(predicted: np.ndarray, gold: np.ndarray) -> dict[str, float]:
    """Spearman and Pearson correlation (0 for constant inputs) and mean squared error."""
    constant = np.ptp(predicted) == 0 or np.ptp(gold) == 0
    spearman = 0.0 if constant else float(stats.spearmanr(predicted, gold).statistic)
    pearson = 0.0 if constant else float(stats.pearsonr(predicted, gold).statistic)
    return {
        "spearman": spearman,
        "pearson": pearson,
        "mse": float(np.mean((predicted - gold) ** 2)),
    }


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


def token_metrics(
    predicted: np.ndarray, gold: np.ndarray, label_names: Sequence[str]
) -> dict[str, float]:
    """Span precision / recall / F1 over BIO entities, and token accuracy; -100 is ignored."""
    gold_spans, predicted_spans = entity_spans(predicted, gold, label_names)
    correct_tokens = counted_tokens = 0
    for pred_row, gold_row in zip(predicted, gold, strict=True):
        keep = gold_row != -100
        correct_tokens += int((pred_row[keep] == gold_row[keep]).sum())
        counted_tokens += int(keep.sum())
    hits = len(gold_spans & predicted_spans)
    precision = hits / len(predicted_spans) if predicted_spans else 0.0
    recall = hits / len(gold_spans) if gold_spans else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {
        "span_f1": f1,
        "span_precision": precision,
        "span_recall": recall,
        "token_accuracy": correct_tokens / counted_tokens if counted_tokens else 0.0,
    }


Span = tuple[int, int, int, str]
"""(row, start, end exclusive, entity type) of one entity in a batch of tag rows."""


def entity_spans(
    predicted: np.ndarray, gold: np.ndarray, label_names: Sequence[str]
) -> tuple[set[Span], set[Span]]:
    """Gold and predicted entities of tag-id rows (positions labelled -100 are skipped)."""
    gold_spans: set[Span] = set()
    predicted_spans: set[Span] = set()
    for row, (pred_row, gold_row) in enumerate(zip(predicted, gold, strict=True)):
        keep = gold_row != -100
        gold_spans |= {(row, *span) for span in bio_spans([label_names[i] for i in gold_row[keep]])}
        predicted_spans |= {
            (row, *span) for span in bio_spans([label_names[i] for i in pred_row[keep]])
        }
    return gold_spans, predicted_spans


def bio_spans(tags: Sequence[str]) -> list[tuple[int, int, str]]:
    """(start, end exclusive, type) of each entity; an I- tag after O or another type opens one."""
    spans: list[tuple[int, int, str]] = []
    start, kind = -1, ""
    for i, tag in enumerate([*tags, "O"]):
        prefix, _, tag_type = tag.partition("-")
        continues = prefix == "I" and tag_type == kind and start >= 0
        if start >= 0 and not continues:
            spans.append((start, i, kind))
            start, kind = -1, ""
        if prefix in ("B", "I") and not continues:
            start, kind = i, tag_type
    return spans
