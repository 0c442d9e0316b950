"""What reading labels of any task needs: numbers spelled in labels, the natural order of label
names, and the refusal of a column of numbers taken for classes. Each task parses its own
labels (`adaptlab.tasks`)."""

import math
from collections.abc import Sequence

from adaptlab.data.readers import RawRow
from adaptlab.errors import DataError

ParsedLabel = str | tuple[str, ...] | float
"""A label before ids: a class name, a label set or word tags (tuple), or a number."""


def spelled_number(text: str) -> float | None:
    """The finite number a label spells, or None."""
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def spells_nan(text: str) -> bool:
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
    values = [spelled_number(str(row.label)) for row in labels]
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


def label_units(label: ParsedLabel) -> tuple[str, ...]:
    """The label names one parsed label uses: its class, its set, or its word tags."""
    if isinstance(label, float):
        return ()
    return label if isinstance(label, tuple) else (label,)


def natural_key(name: str) -> tuple[float, str]:
    """Sort numeric names by value (so 2 comes before 10), then the rest as text."""
    value = spelled_number(name)
    return (math.inf if value is None else value, name)
