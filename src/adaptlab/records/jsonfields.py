"""Typed reads of one JSON object (a stored record), each error naming the field's path.

A number can be read within a range (`within`: finite, from its smallest to its largest
value) and an integer with a least value (`least`: 0 for a count), so that a value no run
could have written is refused where it is read, not drawn or compared later. A measurement
that may be NaN or infinite because its run diverged (`diverged`) is read as it is, for the
report to show as diverged; a finite one must still lie in its range.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Final

from adaptlab.errors import ConfigError

REQUIRED: Final = object()
"""Default of a field that must be present."""
Range = tuple[float, float]
"""The smallest and the largest value a number may take, both allowed; it must be finite."""
FINITE: Final[Range] = (-math.inf, math.inf)
NOT_NEGATIVE: Final[Range] = (0.0, math.inf)
Ranges = Range | Callable[[str], Range]
"""The range of every number of an object, or each one's by its name."""


class JsonObject:
    """A JSON object read field by field; errors read `WHERE: spec.train.epochs: expected an
    integer, got '3'` (`where` names the file or row, `prefix` the path to this object)."""

    def __init__(self, data: object, where: str, prefix: str = "") -> None:
        if not isinstance(data, Mapping):
            name = f"{where}: {prefix.rstrip('.')}" if prefix else where
            raise ConfigError(f"{name}: expected a JSON object, got {_shown(data)}")
        self.data: Mapping[str, Any] = data
        self.where = where
        self.prefix = prefix

    def __contains__(self, key: str) -> bool:
        return key in self.data

    def refuse_unknown(self, known: Iterable[str]) -> None:
        """A field this version does not know is an error, not something silently dropped."""
        unknown = sorted(set(self.data) - set(known))
        if unknown:
            raise ConfigError(f"{self._path(unknown[0])}: unknown field")

    @contextmanager
    def naming(self, key: str = "") -> Iterator[None]:
        """Inside, a ConfigError of a check made on values read here (a method's options) is
        raised again naming this object, and `key` where given, as a failed read is."""
        try:
            yield
        except ConfigError as error:
            raise ConfigError(self._path(f"{key}: {error}" if key else str(error))) from None

    def _get(self, key: str, default: Any) -> Any:
        if key in self.data:
            return self.data[key]
        if default is REQUIRED:
            raise ConfigError(f"{self._path(key)}: missing")
        return default

    def _fail(self, key: str, expected: str, value: object) -> ConfigError:
        return ConfigError(f"{self._path(key)}: expected {expected}, got {_shown(value)}")

    def _path(self, key: str) -> str:
        return f"{self.where}: {self.prefix}{key}"

    def text(self, key: str, default: Any = REQUIRED) -> str:
        value = self._get(key, default)
        if not isinstance(value, str):
            raise self._fail(key, "a string", value)
        return value

    def optional_text(self, key: str, default: Any = None) -> str | None:
        value = self._get(key, default)
        if value is not None and not isinstance(value, str):
            raise self._fail(key, "a string or null", value)
        return value

    def boolean(self, key: str, default: Any = REQUIRED) -> bool:
        value = self._get(key, default)
        if not isinstance(value, bool):
            raise self._fail(key, "true or false", value)
        return value

    def integer(self, key: str, default: Any = REQUIRED, least: int | None = None) -> int:
        value = self._get(key, default)
        if not _is_int(value, least):
            raise self._fail(key, _integer(least), value)
        return int(value)

    def optional_integer(
        self, key: str, default: Any = None, least: int | None = None
    ) -> int | None:
        value = self._get(key, default)
        if value is not None and not _is_int(value, least):
            raise self._fail(key, f"{_integer(least)} or null", value)
        return None if value is None else int(value)

    def number(
        self,
        key: str,
        default: Any = REQUIRED,
        within: Range | None = None,
        diverged: bool = False,
    ) -> float:
        value = self._get(key, default)
        if not _is_number(value, within, diverged):
            raise self._fail(key, _number(within, diverged), value)
        return float(value)

    def optional_number(
        self, key: str, default: Any = None, within: Range | None = None
    ) -> float | None:
        value = self._get(key, default)
        if value is not None and not _is_number(value, within):
            raise self._fail(key, f"{_number(within)} or null", value)
        return None if value is None else float(value)

    def texts(self, key: str, default: Any = REQUIRED) -> tuple[str, ...]:
        value = self._get(key, default)
        if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
            raise self._fail(key, "a list of strings", value)
        return tuple(value)

    def mapping(self, key: str, default: Any = REQUIRED) -> Mapping[str, Any]:
        """A JSON object kept as it is (method options, data options, analysis results)."""
        value = self._get(key, default)
        if not isinstance(value, Mapping):
            raise self._fail(key, "a JSON object", value)
        return value

    def numbers(
        self,
        key: str,
        default: Any = REQUIRED,
        within: Ranges | None = None,
        diverged: bool = False,
    ) -> dict[str, float]:
        """A name -> number object, such as a split's metrics (`within`: their range, or
        each one's by its name); a bad number is named by its own path."""
        found = JsonObject(self.mapping(key, default), self.where, f"{self.prefix}{key}.")
        ranged = within if callable(within) else lambda name: within
        return {
            str(name): found.number(name, within=ranged(name), diverged=diverged)
            for name in found.data
        }

    def integers(
        self, key: str, default: Any = REQUIRED, least: int | None = None
    ) -> dict[str, int]:
        """A name -> integer object, such as split sizes or parameter counts."""
        found = JsonObject(self.mapping(key, default), self.where, f"{self.prefix}{key}.")
        return {str(name): found.integer(name, least=least) for name in found.data}

    def object(self, key: str, default: Any = REQUIRED) -> JsonObject:
        return JsonObject(self._get(key, default), self.where, f"{self.prefix}{key}.")

    def objects(self, key: str, default: Any = REQUIRED) -> list[JsonObject]:
        value = self._get(key, default)
        if not isinstance(value, list | tuple):
            raise self._fail(key, "a list", value)
        return [
            JsonObject(item, self.where, f"{self.prefix}{key}[{i}].")
            for i, item in enumerate(value)
        ]


def _is_int(value: object, least: int | None = None) -> bool:
    if not isinstance(value, int) or isinstance(value, bool):
        return False
    return least is None or value >= least


def _is_number(value: object, within: Range | None = None, diverged: bool = False) -> bool:
    if not isinstance(value, int | float) or isinstance(value, bool):
        return False
    try:
        number = float(value)
    except OverflowError:  # an integer past the largest float
        return False
    if within is None:
        return True
    if not math.isfinite(number):
        return diverged
    return within[0] <= number <= within[1]


def _integer(least: int | None) -> str:
    return "an integer" if least is None else f"an integer of at least {least}"


def _number(within: Range | None, diverged: bool = False) -> str:
    """What a number `within` must be, in words."""
    if within is None:
        return "a number"
    low, high = within
    if math.isinf(low) and math.isinf(high):
        words = "a finite number"
    elif math.isinf(high):
        words = f"a finite number of at least {low:g}"
    elif math.isinf(low):
        words = f"a finite number of at most {high:g}"
    else:
        words = f"a number from {low:g} to {high:g}"
    return f"{words} (or a diverged run's NaN or infinity)" if diverged else words


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
