"""Typed reads of one JSON object (a stored record), each error naming the field's path."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Final

from adaptlab.errors import ConfigError

REQUIRED: Final = object()
"""Default of a field that must be present."""


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

    def integer(self, key: str, default: Any = REQUIRED) -> int:
        value = self._get(key, default)
        if not _is_int(value):
            raise self._fail(key, "an integer", value)
        return int(value)

    def optional_integer(self, key: str, default: Any = None) -> int | None:
        value = self._get(key, default)
        if value is not None and not _is_int(value):
            raise self._fail(key, "an integer or null", value)
        return None if value is None else int(value)

    def number(self, key: str, default: Any = REQUIRED) -> float:
        value = self._get(key, default)
        if not _is_number(value):
            raise self._fail(key, "a number", value)
        return float(value)

    def optional_number(self, key: str, default: Any = None) -> float | None:
        value = self._get(key, default)
        if value is not None and not _is_number(value):
            raise self._fail(key, "a number or null", value)
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

    def numbers(self, key: str, default: Any = REQUIRED) -> dict[str, float]:
        """A name -> number object, such as a split's metrics."""
        value = self.mapping(key, default)
        if not all(_is_number(v) for v in value.values()):
            raise self._fail(key, "an object of numbers", value)
        return {str(name): float(v) for name, v in value.items()}

    def integers(self, key: str, default: Any = REQUIRED) -> dict[str, int]:
        """A name -> integer object, such as split sizes or parameter counts."""
        value = self.mapping(key, default)
        if not all(_is_int(v) for v in value.values()):
            raise self._fail(key, "an object of integers", value)
        return {str(name): int(v) for name, v in value.items()}

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


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
