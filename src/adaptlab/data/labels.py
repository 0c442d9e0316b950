"""Infer the task from raw labels, parse labels per task and fix the label-name order."""

import math
from collections.abc import Iterable, Sequence

from adaptlab.data.readers import RawRow
from adaptlab.errors import DataError
from adaptlab.tasks import TaskKind

ParsedLabel = str | tuple[str, ...] | float
"""A label before ids: a class name, a label set or word tags (tuple), or a number."""


def _number(text: str) -> float | None:
    """The finite number a label spells, or None."""
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def infer_task(rows: Sequence[RawRow], separator: str) -> TaskKind:
    """Guess the task: word lists -> token; label sets -> multi_label; decimals -> regression."""
    if any(isinstance(row.text, tuple) for row in rows):
        return "token"
    if any(isinstance(row.label, tuple) or separator in row.label for row in rows):
        return "multi_label"
    numbers = [_number(row.label) for row in rows if isinstance(row.label, str)]
    if all(value is not None for value in numbers) and any(
        value is not None and not value.is_integer() for value in numbers
    ):
        return "regression"
    return "single_label"


def _spells_nan(text: str) -> bool:
    """Whether a label is NaN (`nan`, `NaN`): how numeric tools write a missing value."""
    try:
        return math.isnan(float(text))
    except ValueError:
        return False


def refuse_numeric_classes(rows: Sequence[RawRow], column: str) -> None:
    """Fail when labels about to be taken for classes are a column of numbers: most of them
    numeric, and the numbers not all whole or more distinct than half the rows (fewer than two
    examples a class). Trained as classes, such a column gives one class per value."""
    labels = [row for row in rows if isinstance(row.label, str)]
    values = [_number(str(row.label)) for row in labels]
    numbers = {value for value in values if value is not None}
    if sum(value is not None for value in values) * 2 <= len(labels):
        return
    if all(value.is_integer() for value in numbers) and len(numbers) * 2 <= len(labels):
        return
    found = (
        f"label column '{column}' has {len(numbers):,} distinct numeric values in "
        f"{len(labels):,} rows"
    )
    odd = next((row for row, value in zip(labels, values, strict=True) if value is None), None)
    if odd is None:
        raise DataError(
            f"{found}; use --task regression (--task single_label keeps them as classes)"
        )
    raise DataError(
        f"{found}, and {odd.label!r} ({odd.where}) is not a number; fill it in or drop that "
        "row, and use --task regression"
    )


def parse_label(row: RawRow, task: TaskKind, separator: str) -> ParsedLabel:
    """Parse one raw label for the task, failing on a label that cannot mean that task."""
    if task == "token":
        if not isinstance(row.text, tuple) or not isinstance(row.label, tuple):
            raise DataError(
                f"{row.where}: token tasks need words with one tag each "
                "(a BIO .txt/.conll file, or JSONL with word and tag lists)"
            )
        if len(row.text) != len(row.label):
            raise DataError(
                f"{row.where} has {len(row.text)} words but {len(row.label)} tags; "
                "give one tag per word"
            )
        return row.label
    if isinstance(row.text, tuple):
        raise DataError(f"{row.where} gives a list of words; use task 'token' for word lists")
    if task == "multi_label":
        parts = row.label if isinstance(row.label, tuple) else row.label.split(separator)
        return tuple(sorted({part.strip() for part in parts if part.strip()}))
    if isinstance(row.label, tuple):
        raise DataError(
            f"{row.where} gives a list of labels; use task 'multi_label' for label sets"
        )
    if task == "regression":
        value = _number(row.label)
        if value is None:
            raise DataError(f"{row.where}: label {row.label!r} is not a number (regression task)")
        return value
    if not row.label:
        raise DataError(f"{row.where} has an empty label; fill it in or drop the row")
    if _spells_nan(row.label):
        raise DataError(
            f"{row.where} has label {row.label!r}, a missing value rather than a class; fill it "
            "in or drop the row"
        )
    return row.label


def label_units(label: ParsedLabel) -> tuple[str, ...]:
    """The label names one parsed label uses: its class, its set, or its word tags."""
    if isinstance(label, float):
        return ()
    return label if isinstance(label, tuple) else (label,)


def _natural_key(name: str) -> tuple[float, str]:
    """Sort numeric names by value (so 2 comes before 10), then the rest as text."""
    value = _number(name)
    return (math.inf if value is None else value, name)


def _bio_key(tag: str) -> tuple[int, str, str]:
    """Sort O first, then entity types alphabetically with B- before I-."""
    return (0, "", "") if tag == "O" else (1, tag[2:], tag[:2])


def label_order(labels: Iterable[ParsedLabel], task: TaskKind) -> tuple[str, ...]:
    """Label names in id order: BIO order for tags, natural sort otherwise, none for regression."""
    names = {name for label in labels for name in label_units(label)}
    if task == "token":
        return tuple(sorted(names, key=_bio_key))
    return tuple(sorted(names, key=_natural_key))
