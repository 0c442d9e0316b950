"""Metrics against hand-computed values and reference implementations."""

import numpy as np
import pytest
from scipy import stats

from adaptlab.tasks.multi_label import multi_label_metrics
from adaptlab.tasks.registry import get_task
from adaptlab.tasks.regression import regression_metrics
from adaptlab.tasks.single_label import classification_metrics
from adaptlab.tasks.token import bio_spans, token_metrics


def test_classification_by_hand() -> None:
    gold = np.array([0, 0, 1, 1, 2, 2])
    pred = np.array([0, 1, 1, 1, 2, 0])
    m = classification_metrics(pred, gold, 3)
    assert m["accuracy"] == pytest.approx(4 / 6)
    f1 = [2 * 1 / (2 + 2), 2 * 2 / (3 + 2), 2 * 1 / (1 + 2)]
    assert m["macro_f1"] == pytest.approx(np.mean(f1))
    assert m["micro_f1"] == pytest.approx(4 / 6)


def test_matthews_binary_matches_phi_coefficient() -> None:
    gold = np.array([1, 1, 1, 0, 0, 0, 1, 0])
    pred = np.array([1, 0, 1, 0, 1, 0, 1, 0])
    tp, tn, fp, fn = 3, 3, 1, 1
    phi = (tp * tn - fp * fn) / np.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))
    assert classification_metrics(pred, gold, 2)["mcc"] == pytest.approx(phi)


def test_constant_prediction_has_zero_mcc_not_nan() -> None:
    m = classification_metrics(np.zeros(5, dtype=int), np.array([0, 1, 0, 1, 1]), 2)
    assert m["mcc"] == 0.0


def test_bio_spans() -> None:
    tags = ["B-PER", "I-PER", "O", "I-LOC", "B-LOC", "I-ORG", "O"]
    assert bio_spans(tags) == [(0, 2, "PER"), (3, 4, "LOC"), (4, 5, "LOC"), (5, 6, "ORG")]


def test_span_f1_ignores_masked_positions() -> None:
    names = ["O", "B-PER", "I-PER"]
    gold = np.array([[1, 2, -100, 0, 1]])
    pred = np.array([[1, 2, 0, 0, 0]])
    m = token_metrics(pred, gold, names)
    assert m["span_precision"] == 1.0 and m["span_recall"] == 0.5
    assert m["span_f1"] == pytest.approx(2 / 3)
    assert m["token_accuracy"] == pytest.approx(3 / 4)


def test_regression_matches_scipy_and_is_zero_for_constants() -> None:
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=30), rng.normal(size=30)
    assert regression_metrics(x, y)["spearman"] == pytest.approx(stats.spearmanr(x, y).statistic)
    assert regression_metrics(np.ones(5), y[:5])["spearman"] == 0.0


def test_mean_r_precision() -> None:
    scores = np.array([[0.9, 0.8, 0.1], [0.2, 0.9, 0.5], [0.3, 0.2, 0.1]])
    gold = np.array([[1, 0, 1], [0, 1, 0], [0, 0, 0]])
    # row 0: R=2, top-2 = {0, 1} -> 1/2; row 1: R=1, top-1 = {1} -> 1; row 2 has no labels
    assert multi_label_metrics(scores, gold)["mean_rprecision"] == pytest.approx(0.75)


def test_compute_metrics_dispatches_on_task() -> None:
    logits = np.array([[2.0, 0.0], [0.0, 1.0]])
    assert get_task("single_label").scores(logits, np.array([0, 1]), [])["accuracy"] == 1.0
