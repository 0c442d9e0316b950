"""Labels matched by name between a model's training data and the data it is scored on."""

from __future__ import annotations

import pytest

from adaptlab.data.label_match import align_labels
from adaptlab.data.types import Dataset, Example
from adaptlab.errors import DataError


def dataset(
    labels: tuple[str, ...], task: str = "single_label", **splits: tuple[Example, ...]
) -> Dataset:
    return Dataset("target", task, labels, splits, "test data")  # type: ignore[arg-type]


def test_labels_in_another_order_are_renumbered_by_name():
    examples = (Example("bad", 0), Example("fine", 1), Example("good", 2))
    target = dataset(("negative", "neutral", "positive"), test=examples)
    aligned = align_labels(target, ["positive", "negative", "neutral"], "twitter-sentiment")
    assert aligned.label_names == ("positive", "negative", "neutral")
    assert [e.label for e in aligned.splits["test"]] == [1, 2, 0]
    assert [e.text for e in aligned.splits["test"]] == ["bad", "fine", "good"]
    same = align_labels(target, ["negative", "neutral", "positive"], "twitter-sentiment")
    assert same is target


def test_label_sets_and_tag_sequences_are_renumbered_too():
    target = dataset(("B-PER", "O"), "token", test=(Example(("Ana", "ran"), (0, 1)),))
    aligned = align_labels(target, ["O", "B-PER"], "the adapter")
    assert aligned.splits["test"][0].label == (1, 0)


def test_a_different_label_set_is_one_line_naming_both():
    target = dataset(("negative", "positive"), test=(Example("x", 0),))
    with pytest.raises(DataError) as caught:
        align_labels(target, ["negative", "neutral", "positive"], "twitter-sentiment")
    message = str(caught.value)
    assert message == (
        "target has labels negative, positive; twitter-sentiment was trained on negative, "
        "neutral, positive: labels are matched by name and must be the same set"
    )
