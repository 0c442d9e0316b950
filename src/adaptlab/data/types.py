"""The data records every layer exchanges: one labelled example and a split dataset."""

from collections.abc import Mapping
from dataclasses import dataclass, field

SPLIT_NAMES: tuple[str, ...] = ("train", "dev", "test")

LabelValue = int | tuple[int, ...] | float
"""A label as an example holds it: a class id, label ids, tag ids, or a number."""


@dataclass(frozen=True)
class Origin:
    """Where a record is in its source: the file's name and the line the record starts on
    (1 = the file's first line, a header included); for an hf: source, the split's name and the
    row's position in it (from 1). A run's split record lists these."""

    file: str
    row: int


@dataclass(frozen=True)
class Example:
    """One labelled input; `text` is a tuple of words for token tasks. `origin` and `time`
    (its time column's value, for data split by time) say where it came from; they take no
    part in comparing examples."""

    text: str | tuple[str, ...]
    label: LabelValue
    text_pair: str | None = None
    origin: Origin | None = field(default=None, compare=False)
    time: str | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Period:
    """The first and last time of one split's rows, written as the rows write them."""

    split: str
    first: str
    last: str


@dataclass(frozen=True)
class TimeSplit:
    """How rows were split by time: the column dating them, and each split's period."""

    column: str
    periods: tuple[Period, ...]

    def spans(self) -> str:
        """Each split's period: `train 2007-08-21 .. 2015-09-08; dev ...; test ...`."""
        return "; ".join(f"{p.split} {p.first} .. {p.last}" for p in self.periods)

    def describe(self) -> str:
        """The rule and its cut dates, for a data set's description and a run's log."""
        return (
            f"chronological by {self.column} (earliest 80% train, next 10% dev, latest 10% "
            f"test): {self.spans()}"
        )


@dataclass(frozen=True)
class Dataset:
    """A labelled corpus with fixed train/dev/test splits and the story of how they were made.

    `splits` is a plain dict (so a dataset can be sent to worker processes); treat it as
    read-only. It is left out of the hash, which name, task, labels and description make.
    """

    name: str
    task: str
    """The name of its (labelled) task, `adaptlab.tasks`."""
    label_names: tuple[str, ...]
    splits: Mapping[str, tuple[Example, ...]] = field(hash=False)
    description: str
    time_split: TimeSplit | None = None
    """Where the splits were cut, when they were cut by time (None otherwise)."""
