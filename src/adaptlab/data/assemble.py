"""Turn raw rows into a Dataset: guess the task, split, fix label ids, reject unseen labels."""

from collections.abc import Sequence

from adaptlab.data.chronology import chronological_split, parse_times, time_split
from adaptlab.data.files import RowSplits
from adaptlab.data.label_kind import LabelKind, LabelledTasks
from adaptlab.data.labels import ParsedLabel, label_units
from adaptlab.data.readers import RawRow
from adaptlab.data.splits import SPLIT_SEED, carve_dev, three_way_split
from adaptlab.data.types import SPLIT_NAMES, Dataset, Example, TimeSplit
from adaptlab.errors import DataError

Labelled = list[tuple[RawRow, ParsedLabel]]


def _pick(rows: Labelled, indices: Sequence[int]) -> Labelled:
    """The rows at the given indices."""
    return [rows[index] for index in indices]


def _split(
    name: str, parts: dict[str, Labelled | None], task: LabelKind, time_column: str | None
) -> tuple[dict[str, Labelled], str, TimeSplit | None]:
    """Fill in missing dev/test splits by the fixed seeded rules, or split by time when
    `time_column` is given; say which rule was used, and where time cut the splits."""
    train, dev, test = parts["train"] or [], parts["dev"], parts["test"]
    if time_column is not None:
        return _by_time(name, train, dev is not None or test is not None, time_column)
    keys = [task.stratum(label, "O") for _, label in train]
    how = f"{task.stratified_by}, seed {SPLIT_SEED}"
    if dev is None and test is None:
        train_at, dev_at, test_at = three_way_split(keys)
        rule = f"one source split 80/10/10 ({how})"
        picked = {"train": train_at, "dev": dev_at, "test": test_at}
        return {split: _pick(train, at) for split, at in picked.items()}, rule, None
    if test is None:
        raise DataError(f"{name} has a dev split but no test split; add a test split (test.csv)")
    if dev is None:
        train_at, dev_at = carve_dev(keys)
        rule = f"train and test as given; dev carved as 10% of train ({how})"
        carved = {"train": _pick(train, train_at), "dev": _pick(train, dev_at), "test": test}
        return carved, rule, None
    return {"train": train, "dev": dev, "test": test}, "train, dev and test as given", None


def _by_time(
    name: str, rows: Labelled, given: bool, column: str
) -> tuple[dict[str, Labelled], str, TimeSplit]:
    """The chronological split of one source's rows, with its cut dates as the rule."""
    if given:
        raise DataError(
            f"{name} comes with its own dev/test split; a chronological split cuts one set of "
            "rows by time: give them in one file"
        )
    parts = chronological_split(parse_times([row for row, _ in rows]))
    picked = {split: _pick(rows, at) for split, at in zip(SPLIT_NAMES, parts, strict=True)}
    cuts = time_split(column, {split: [row.time for row, _ in picked[split]] for split in picked})
    return picked, cuts.describe(), cuts


def _check_labels(splits: dict[str, Labelled], index: dict[str, int], names_given: bool) -> None:
    """Fail on the first label a split uses that the label names do not contain."""
    for split in SPLIT_NAMES:
        for row, label in splits[split]:
            for unit in label_units(label):
                if unit in index:
                    continue
                if split == "train" or names_given:
                    raise DataError(
                        f"label '{unit}' ({row.where}) is not one of the expected labels "
                        f"{', '.join(index)}; check that the data file is the documented version"
                    )
                raise DataError(
                    f"label '{unit}' in the {split} split ({row.where}) never appears in the "
                    "training split; add training examples with it or remove those rows"
                )


def _example(row: RawRow, label: ParsedLabel, task: LabelKind, index: dict[str, int]) -> Example:
    """One example with its label as the task holds it (ids, or a number)."""
    value = task.label_value(label, index)
    return Example(row.text, value, row.text_pair, origin=row.origin, time=row.time)


def build_dataset(
    name: str,
    source: str,
    rows: RowSplits,
    task: str | None,
    tasks: LabelledTasks,
    separator: str,
    names: tuple[str, ...] | None = None,
    time_column: str | None = None,
    label_column: str = "label",
) -> Dataset:
    """Build a Dataset from raw rows; `names` fixes the label order (else sorted train labels).

    With `time_column` (the column the rows' times came from) the rows are split by time.
    `task` names the task among `tasks`, or None to guess it from the labels; labels guessed
    to be a task's must not look like a mistake (`check_guess`, naming `label_column`).
    """
    every = rows.train + (rows.dev or []) + (rows.test or [])
    if task is None:
        kind = tasks.guessed(every, separator)
        kind.check_guess(every, label_column)
    else:
        kind = tasks.named(task)
    parts = {
        split: None if part is None else [(row, kind.parse_label(row, separator)) for row in part]
        for split, part in zip(SPLIT_NAMES, (rows.train, rows.dev, rows.test), strict=True)
    }
    splits, rule, cuts = _split(name, parts, kind, time_column)
    for split in SPLIT_NAMES:
        if not splits[split]:
            raise DataError(
                f"the {split} split of {name} is empty after splitting; add more rows "
                "or give train/dev/test files"
            )
    train_labels = (label for _, label in splits["train"])
    if names is not None:
        label_names = names
    else:
        label_names = kind.label_order(
            unit for label in train_labels for unit in label_units(label)
        )
    if len(label_names) < kind.min_labels:
        raise DataError(
            f"the training split of {name} has {len(label_names)} label(s) "
            f"({', '.join(label_names) or 'none'}); a {kind.name} task needs at least "
            f"{kind.min_labels}"
        )
    index = {label: position for position, label in enumerate(label_names)}
    _check_labels(splits, index, names is not None)
    examples = {
        split: tuple(_example(row, label, kind, index) for row, label in splits[split])
        for split in SPLIT_NAMES
    }
    sizes = ", ".join(f"{split} {len(examples[split])}" for split in SPLIT_NAMES)
    return Dataset(
        name=name,
        task=kind.name,
        label_names=label_names,
        splits=examples,
        description=f"{source}; {rule}: {sizes}.",
        time_split=cuts,
    )
