"""The union of single-label data sets that a multi-task run trains on, and the way back from
its labels to one data set's.

Each split of the union is the data sets' splits one after another; each label is named
`<data set>:<label>`, so the union has one head over every data set's classes. Scoring the
union's adapter on one data set keeps that data set's columns of the head (`label_columns`):
only its own labels compete. Generative data sets are united where they are encoded
(`adaptlab.runs.generative_union`): a language model has no labels to rename.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from adaptlab.data.types import SPLIT_NAMES, Dataset, Example
from adaptlab.errors import DataError

SINGLE_LABEL = "single_label"
SEPARATOR = ":"
"""Between a data set's name and one of its labels in a union label: `reuters-r8:earn`."""


def union_label(data: str, label: str) -> str:
    """The union's name of `data`'s label `label`."""
    return f"{data}{SEPARATOR}{label}"


def union_of(datasets: Sequence[Dataset]) -> Dataset:
    """One data set holding every example of `datasets` (single-label, distinct names), each
    label renamed `<data set>:<label>`."""
    names = [dataset.name for dataset in datasets]
    for dataset in datasets:
        if dataset.task != SINGLE_LABEL:
            raise DataError(
                f"a multi-task run trains one head over single-label data sets; {dataset.name} "
                f"is a {dataset.task} data set"
            )
        if names.count(dataset.name) > 1:
            raise DataError(
                f"two data sets of a multi-task run are named {dataset.name!r}; their labels "
                "would mix: rename one file"
            )
    labels: list[str] = []
    splits: dict[str, list[Example]] = {split: [] for split in SPLIT_NAMES}
    for dataset in datasets:
        offset = len(labels)
        labels += [union_label(dataset.name, label) for label in dataset.label_names]
        for split in SPLIT_NAMES:
            splits[split] += [
                replace(example, label=offset + example.label)
                for example in dataset.splits[split]
                if isinstance(example.label, int)  # a single-label example's is
            ]
    stories = " ".join(f"{d.name}: {d.description}" for d in datasets)
    return Dataset(
        name=" + ".join(names),
        task=SINGLE_LABEL,
        label_names=tuple(labels),
        splits={split: tuple(examples) for split, examples in splits.items()},
        description=f"Multi-task union, labels named data set:label. {stories}",
    )


def label_columns(union_labels: Sequence[str], dataset: Dataset) -> tuple[int, ...]:
    """The columns of a union head that hold `dataset`'s labels, in `dataset`'s label order;
    one line when the union was not trained on it."""
    wanted = [union_label(dataset.name, label) for label in dataset.label_names]
    missing = [label for label in wanted if label not in union_labels]
    if missing:
        trained = sorted({label.split(SEPARATOR)[0] for label in union_labels})
        raise DataError(
            f"the multi-task adapter was not trained on {dataset.name}'s label "
            f"{missing[0].split(SEPARATOR, 1)[1]!r} (it was trained on {', '.join(trained)})"
        )
    return tuple(list(union_labels).index(label) for label in wanted)
