"""Chronological splits: train on the earliest examples, dev and test on later periods.

Data that changes over time must be split by time, or the test set holds examples from the
period the model trained on and overstates how it will do on what comes next. The rows are
ordered by their time (ties keep file order) and cut 80/10/10, so no training example is later
than any dev example, and no dev example later than any test example.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime

from adaptlab.data.readers import RawRow
from adaptlab.data.splits import DEV_SHARE, TEST_SHARE
from adaptlab.data.types import Period, TimeSplit
from adaptlab.errors import DataError


def parse_times(rows: Sequence[RawRow]) -> list[float]:
    """Every row's time as a number: all numbers (years, Unix times) or all ISO dates and
    times (`2014-12-09`, `2014-12-09 16:55:00`; no zone means UTC)."""
    texts = [(row.time or "").strip() for row in rows]
    numbers = [_number(text) for text in texts]
    if all(number is not None for number in numbers):
        return [number for number in numbers if number is not None]
    times = []
    for text, row in zip(texts, rows, strict=True):
        try:
            moment = datetime.fromisoformat(text)
        except ValueError:
            raise DataError(
                f"time {text!r} ({row.where}) is neither a number nor an ISO date "
                "(YYYY-MM-DD, optionally with a time); fix it or pick another time column"
            ) from None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        times.append(moment.timestamp())
    return times


def chronological_split(times: Sequence[float]) -> tuple[list[int], list[int], list[int]]:
    """(train, dev, test) indices: the earliest 80%, the next 10%, the latest 10%."""
    order = sorted(range(len(times)), key=lambda index: times[index])
    test = math.floor(len(order) * TEST_SHARE)
    dev = math.floor(len(order) * DEV_SHARE)
    train_end, dev_end = len(order) - dev - test, len(order) - test
    return order[:train_end], order[train_end:dev_end], order[dev_end:]


def time_split(column: str, times: Mapping[str, Sequence[str | None]]) -> TimeSplit:
    """Where each split's period begins and ends, in the rows' own time notation: the times of
    its first and last row (the rows of a split cut by time are in time order)."""
    periods = tuple(
        Period(split, _time(found[0]), _time(found[-1])) for split, found in times.items() if found
    )
    return TimeSplit(column, periods)


def _time(text: str | None) -> str:
    """A time as its source wrote it."""
    return (text or "").strip()


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None
