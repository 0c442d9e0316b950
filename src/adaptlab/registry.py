"""One small registry class for every kind of plug-in (methods, composition blocks, continual
strategies, transferability estimators): entries by name, in registration order (built-in
ones first, their modules imported on first use), an unknown name a one-line error that lists
the known ones. What an entry supports it says itself, so listings and help text are made
from the registry, never kept by hand beside it."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Mapping
from typing import Generic, Protocol, TypeVar

from adaptlab.errors import ConfigError


class Named(Protocol):
    """What a registry holds: anything with a name."""

    @property
    def name(self) -> str: ...


T = TypeVar("T", bound=Named)


class Registry(Generic[T]):
    """Entries of one kind: `kind` and `plural` name it in messages ("strategy",
    "strategies"; the plural is the kind + "s" unless given).

    `builtin` maps the names of the entries adaptlab ships to the modules that register them.
    Such a module is imported when its entry is first looked up (every one of them when the
    registry is listed), so that importing a registry does not import each plug-in and what
    the plug-in needs; built-in entries list first, in the order `builtin` gives them.
    """

    def __init__(
        self, kind: str, plural: str | None = None, builtin: Mapping[str, str] | None = None
    ) -> None:
        self.kind = kind
        self.plural = plural or f"{kind}s"
        self._builtin = dict(builtin or {})
        self._entries: dict[str, T] = {}

    def register(self, entry: T) -> T:
        """Add `entry` under its name (twice is a programming error); return it, so that this
        also works as a class decorator."""
        if entry.name in self._entries:
            raise ValueError(f"{self.kind} {entry.name!r} is registered twice")
        self._entries[entry.name] = entry
        return entry

    def get(self, name: str) -> T:
        """The entry registered as `name`, or a one-line error listing the known ones."""
        self._load(name)
        try:
            return self._entries[name]
        except KeyError:
            raise ConfigError(
                f"unknown {self.kind} {name!r}; known {self.plural}: {', '.join(self._known())}"
            ) from None

    def listed(self) -> list[str]:
        """Every name, built-in or registered, in listing order, importing nothing (for help
        text that must stay light)."""
        return self._known()

    def names(self, where: Callable[[T], bool] = lambda entry: True) -> list[str]:
        """The names of the entries for which `where` holds, in listing order."""
        return [entry.name for entry in self if where(entry)]

    def __iter__(self) -> Iterator[T]:
        for name in self._builtin:
            self._load(name)
        return iter([self._entries[name] for name in self._known()])

    def __contains__(self, name: object) -> bool:
        return name in self._builtin or name in self._entries

    def __len__(self) -> int:
        return len(self._known())

    def _known(self) -> list[str]:
        """Every name, built-in or registered, in listing order (nothing imported)."""
        return list(dict.fromkeys([*self._builtin, *self._entries]))

    def _load(self, name: str) -> None:
        """Import the module of the built-in entry `name`, unless it is registered already."""
        module = self._builtin.get(name)
        if module is None or name in self._entries:
            return
        importlib.import_module(module)
        if name not in self._entries:
            raise LookupError(f"{module} does not register the {self.kind} {name!r}")
