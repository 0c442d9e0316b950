"""A JSON-able summary of a dataset, for the CLI and reports."""

from collections import Counter
from typing import Any

from adaptlab.data.types import SPLIT_NAMES, Dataset, Example


def _names(label: int | tuple[int, ...] | float, names: tuple[str, ...]) -> Any:
    """A label in words: a class name, a list of names, or the number itself."""
    if isinstance(label, float):
        return label
    if isinstance(label, tuple):
        return [names[index] for index in label]
    return names[label]


def _show(example: Example, names: tuple[str, ...]) -> dict[str, Any]:
    """One example as plain JSON values."""
    text = example.text if isinstance(example.text, str) else list(example.text)
    shown: dict[str, Any] = {"text": text, "label": _names(example.label, names)}
    if example.text_pair is not None:
        shown["text_pair"] = example.text_pair
    return shown


def _label_summary(examples: tuple[Example, ...], names: tuple[str, ...]) -> dict[str, Any]:
    """Counts per label name (per word for token tasks), or min/mean/max for regression."""
    labels = [example.label for example in examples]
    if not names:
        values = [float(label) for label in labels if not isinstance(label, tuple)]
        return {"min": min(values), "mean": sum(values) / len(values), "max": max(values)}
    counts: Counter[int] = Counter()
    for label in labels:
        counts.update(label if isinstance(label, tuple) else [int(label)])
    return {name: counts[index] for index, name in enumerate(names)}


def describe(dataset: Dataset) -> dict[str, Any]:
    """Splits, sizes, label counts per split and two training examples, as JSON-able values."""
    names = dataset.label_names
    return {
        "name": dataset.name,
        "task": dataset.task,
        "description": dataset.description,
        "label_names": list(names),
        "splits": {
            split: {
                "size": len(dataset.splits[split]),
                "labels": _label_summary(dataset.splits[split], names),
            }
            for split in SPLIT_NAMES
        },
        "examples": [_show(example, names) for example in dataset.splits["train"][:2]],
    }
