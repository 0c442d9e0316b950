"""The data records every layer exchanges: one labelled example and a split dataset."""

from collections.abc import Mapping
from dataclasses import dataclass, field

from adaptlab.tasks import TaskKind

SPLIT_NAMES: tuple[str, ...] = ("train", "dev", "test")


@dataclass(frozen=True)
class Example:
    """One labelled input; `text` is a tuple of words for token tasks."""

    text: str | tuple[str, ...]
    label: int | tuple[int, ...] | float
    text_pair: str | None = None


@dataclass(frozen=True)
class Dataset:
    """A labelled corpus with fixed train/dev/test splits and the story of how they were made.

    `splits` is a plain dict (so a dataset can be sent to worker processes); treat it as
    read-only. It is left out of the hash, which name, task, labels and description make.
    """

    name: str
    task: TaskKind
    label_names: tuple[str, ...]
    splits: Mapping[str, tuple[Example, ...]] = field(hash=False)
    description: str
