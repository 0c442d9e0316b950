"""Checks of the numbers a user gives (counts, sizes, seeds, spans), shared by the library and
the command line so that every option of a kind fails the same way, before any work."""

from __future__ import annotations

import math

from adaptlab.errors import ConfigError

MAX_SEED = 2**32 - 1
"""Seeds reach torch, numpy and Python's random; numpy's seeding takes 0 .. 2**32 - 1."""

SHOWN = 60
"""Characters of a bad value that an error message shows."""


def shown(value: object) -> str:
    """`value` as Python writes it, cut to `SHOWN` characters (so a message stays one short
    line whatever a file holds)."""
    try:
        text = repr(value)
    except ValueError:  # an int too long to write out
        text = "a number too long to show"
    return text if len(text) <= SHOWN else text[: SHOWN - 3] + "..."


def at_least(value: int, minimum: int, name: str) -> int:
    """`value` if it is an integer >= `minimum`, else a one-line ConfigError naming `name`."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{name} must be an integer, got {value!r}")
    if value < minimum:
        wanted = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
        raise ConfigError(f"{name} must be {wanted}, got {value}")
    return value


def positive(value: int, name: str) -> int:
    """A count of at least 1 (batch sizes, epochs, sample sizes)."""
    return at_least(value, 1, name)


def seed(value: int, name: str = "seed") -> int:
    """A seed every random generator in use accepts: an integer in 0 .. MAX_SEED."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_SEED:
        raise ConfigError(f"{name} must be an integer from 0 to {MAX_SEED}, got {value!r}")
    return value


def positive_finite(value: float, name: str) -> float:
    """A real number > 0 that is neither NaN nor infinite."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(f"{name} must be a number, got {value!r}")
    if not math.isfinite(value) or value <= 0:
        raise ConfigError(f"{name} must be a finite number > 0, got {value}")
    return float(value)
