"""Match a data set's labels to a trained model's by name, so a model trained on one corpus
can be scored on another whose label ids come in another order (zero-shot transfer)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from adaptlab.data.types import Dataset, Example
from adaptlab.errors import DataError


def align_labels(dataset: Dataset, label_names: Sequence[str], trained_on: str) -> Dataset:
    """`dataset` with its label ids renumbered to `label_names`' order.

    The two label sets must be the same names (order aside); otherwise one line names both.
    `trained_on` says what the names come from ("the adapter", "twitter-sentiment", ...).
    """
    wanted = list(label_names)
    if sorted(dataset.label_names) != sorted(wanted):
        raise DataError(
            f"{dataset.name} has labels {', '.join(dataset.label_names) or 'none'}; "
            f"{trained_on} was trained on {', '.join(wanted) or 'none'}: labels are matched by "
            "name and must be the same set"
        )
    if list(dataset.label_names) == wanted:
        return dataset
    new_id = [wanted.index(name) for name in dataset.label_names]

    def renumbered(example: Example) -> Example:
        label = example.label
        if isinstance(label, tuple):
            return replace(example, label=tuple(new_id[i] for i in label))
        if isinstance(label, int):
            return replace(example, label=new_id[label])
        return example

    splits = {name: tuple(map(renumbered, part)) for name, part in dataset.splits.items()}
    return replace(dataset, label_names=tuple(wanted), splits=splits)
