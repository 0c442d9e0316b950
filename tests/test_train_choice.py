"""The metric that fits the data (default rule on constructed label distributions), and the
per-class counts a run stores for it."""

from __future__ import annotations

import math

import numpy as np
import pytest

from adaptlab.data import Example
from adaptlab.errors import ConfigError
from adaptlab.tasks.choice import choose_metric
from adaptlab.tasks.classes import ClassCounts
from adaptlab.tasks.judging import class_spread, require_metric
from adaptlab.tasks.registry import get_task
from adaptlab.tasks.single_label import classification_metrics


@pytest.mark.parametrize(
    ("counts", "metric"),
    [
        ({"a": 50, "b": 50}, "accuracy"),  # balanced
        ({"a": 300, "b": 100, "c": 120}, "accuracy"),  # exactly 3x: not more than 3x
        ({"a": 301, "b": 100, "c": 120}, "macro_f1"),  # just over 3x
        ({"earn": 517, "acq": 291, "grain": 8}, "macro_f1"),  # a long tail
        ({"a": 40, "b": 0, "c": 39}, "macro_f1"),  # a class missing from the sample
        ({"only": 12}, "accuracy"),  # one class: no spread to speak of
        ({}, "accuracy"),
    ],
)
def test_single_label_data_more_than_3x_skewed_is_judged_by_macro_f1(
    counts: dict[str, int], metric: str
) -> None:
    assert choose_metric("single_label", counts).metric == metric


def test_the_reason_names_the_classes_and_the_ratio() -> None:
    skewed = choose_metric("single_label", {"earn": 517, "acq": 291, "grain": 8})
    assert skewed.reason.startswith(
        "the largest class of the training sample (earn, 517 examples) is 64.6x its smallest "
        "(grain, 8)"
    )
    missing = choose_metric("single_label", {"a": 40, "b": 0})
    assert "class b has no example in the training sample while a has 40" in missing.reason
    balanced = choose_metric("single_label", {"a": 50, "b": 40})
    assert "balanced" in balanced.reason and balanced.metric == "accuracy"


def test_other_tasks_keep_their_primary_metric_and_a_request_wins() -> None:
    skewed = {"PER": 900, "LOC": 10}
    assert choose_metric("token", skewed).metric == "span_f1"
    assert choose_metric("multi_label", skewed).metric == "mean_rprecision"
    assert choose_metric("regression", None).metric == "spearman"
    asked = choose_metric("single_label", {"a": 900, "b": 1}, "accuracy")
    assert (asked.metric, asked.reason) == ("accuracy", "asked for by `metric:` in the study spec")


def test_spread_and_second_metric() -> None:
    spread = class_spread({"a": 5, "b": 20, "c": 20})
    assert spread is not None and (spread.largest, spread.smallest, spread.ratio) == ("b", "a", 4)
    assert math.isinf(class_spread({"a": 5, "b": 0}).ratio)  # type: ignore[union-attr]
    assert get_task("single_label").second_metric("macro_f1") == "accuracy"
    assert get_task("single_label").second_metric("accuracy") == "macro_f1"
    assert get_task("single_label").second_metric("mcc") == "accuracy"
    assert get_task("token").second_metric("span_f1") == "token_accuracy"


def test_a_metric_the_task_does_not_compute_is_one_line() -> None:
    with pytest.raises(ConfigError, match=r"'span_f1' is not computed on r8 \(single_label"):
        require_metric("span_f1", ["accuracy", "macro_f1"], "r8", "single_label")


def test_single_label_counts_match_the_confusion_and_macro_f1() -> None:
    gold = np.array([0, 0, 0, 0, 1, 1, 2, 2, 2, 0])
    predicted = np.array([0, 0, 1, 0, 1, 0, 0, 0, 0, 0])  # class 2 is never predicted
    logits = np.eye(3)[predicted]
    counts = get_task("single_label").evaluated_counts(logits, gold, ["a", "b", "c"])
    assert counts == (
        ClassCounts("a", support=5, predicted=8, correct=4),
        ClassCounts("b", support=2, predicted=2, correct=1),
        ClassCounts("c", support=3, predicted=0, correct=0),
    )
    a = counts[0]
    assert (a.precision, a.recall, a.f1) == (0.5, 0.8, pytest.approx(2 * 0.5 * 0.8 / 1.3))
    macro = classification_metrics(predicted, gold, 3)["macro_f1"]
    assert np.mean([c.f1 for c in counts]) == pytest.approx(macro)


def test_multi_label_and_token_counts() -> None:
    scores = np.array([[1.0, -1.0], [1.0, 1.0], [-1.0, -1.0]])  # > 0 means predicted
    gold = np.array([[1, 0], [0, 1], [1, 0]])
    assert get_task("multi_label").evaluated_counts(scores, gold, ["x", "y"]) == (
        ClassCounts("x", 2, 2, 1),
        ClassCounts("y", 1, 1, 1),
    )
    tags = ["O", "B-PER", "I-PER", "B-LOC"]
    gold_tags = np.array([[1, 2, 0, 3, -100]])
    predicted = np.array([[1, 2, 0, 0, 3]])  # PER right, LOC missed
    logits = np.eye(4)[predicted]
    assert get_task("token").class_names(tags) == ("PER", "LOC")
    assert get_task("token").evaluated_counts(logits, gold_tags, tags) == (
        ClassCounts("PER", 1, 1, 1),
        ClassCounts("LOC", 1, 0, 0),
    )
    assert get_task("regression").evaluated_counts(np.zeros((2, 1)), np.zeros(2), []) is None


def test_training_counts_per_task() -> None:
    single = [Example("t", 0), Example("t", 2), Example("t", 2)]
    assert get_task("single_label").training_counts(single, ["a", "b", "c"]) == {
        "a": 1,
        "b": 0,
        "c": 2,
    }
    multi = [Example("t", (0, 1)), Example("t", (1,))]
    assert get_task("multi_label").training_counts(multi, ["x", "y"]) == {"x": 1, "y": 2}
    tokens = [Example(("Ann", "Lee", "in", "Rome"), (1, 2, 0, 3))]
    assert get_task("token").training_counts(tokens, ["O", "B-PER", "I-PER", "B-LOC"]) == {
        "PER": 1,
        "LOC": 1,
    }
    assert get_task("regression").training_counts([Example("t", 0.5)], []) is None
