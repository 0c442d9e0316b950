"""Results written as JSON hold measurements only: a NaN or infinite number is found and named
before the file is written, so a diverged computation is never saved as if it were fine (and
the file stays JSON, which has no NaN or infinity)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from adaptlab.errors import DataError


def exp_or_inf(value: float) -> float:
    """exp(value), infinite past the largest float instead of an OverflowError (a perplexity
    that overflows is infinite, and then refused where it would be written)."""
    try:
        return math.exp(value)
    except OverflowError:
        return math.inf


def non_finite(value: Any, where: str = "") -> tuple[str, float] | None:
    """The first NaN or infinite number in a JSON-ready value and where it is (`rows[3].loss`);
    None when every number is finite."""
    if isinstance(value, float) and not math.isfinite(value):
        return where or "the value", value
    if isinstance(value, Mapping):
        items: Sequence[tuple[str, Any]] = [
            (f"{where}.{key}" if where else str(key), item) for key, item in value.items()
        ]
    elif isinstance(value, list | tuple):
        items = [(f"{where}[{index}]", item) for index, item in enumerate(value)]
    else:
        return None
    for place, item in items:
        found = non_finite(item, place)
        if found is not None:
            return found
    return None


def finite_json(value: Any, what: str, hint: str) -> bytes:
    """`value` as indented JSON; a DataError naming `what`, the first non-finite number and
    where it is, then `hint` (what to do), when it holds one."""
    found = non_finite(value)
    if found is not None:
        where, number = found
        raise DataError(f"{what}: {where} came out {number}, not a measurement; {hint}")
    return json.dumps(value, indent=2).encode("utf-8")
