"""The method registry: every method registers its name, config class and `apply` once."""

from __future__ import annotations

import math
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, Union, get_args, get_origin, get_type_hints

from adaptlab.errors import ConfigError
from adaptlab.methods.config import MethodConfig
from adaptlab.registry import Registry

if TYPE_CHECKING:  # the registry itself loads no torch: records read method configs by name
    from torch import nn

    from adaptlab.backbone import Backbone
    from adaptlab.methods.results import ApplyContext, MethodResult

    ApplyFn = Callable[[nn.Module, Backbone, Any, ApplyContext], MethodResult]


@dataclass(frozen=True)
class Method:
    """A registered adaptation method."""

    name: str
    config_class: type[MethodConfig]
    apply: ApplyFn
    description: str
    sites: Callable[[Any], frozenset[str]] = lambda config: frozenset()
    """Roles where the method inserts or hooks modules; two methods may not share one."""
    exclusive: bool = False
    """True for methods that cannot be combined with any other (full, head)."""


BUILTIN_METHODS = (
    "full",
    "head",
    "freeze",
    "bitfit",
    "lnfit",
    "houlsby",
    "pfeiffer",
    "parallel",
    "lora",
    "ia3",
    "prefix",
    "mam",
    "lst",
    "fusion",
)
"""adaptlab's methods in the order listings show them; each is registered by the module of
its name, imported when the method is first looked up."""

METHODS: Registry[Method] = Registry(
    "method", builtin={name: f"adaptlab.methods.{name}" for name in BUILTIN_METHODS}
)


def register(method: Method) -> Method:
    """Add `method` to the registry under its name."""
    return METHODS.register(method)


def list_methods() -> list[Method]:
    """Every method: adaptlab's own in listing order, then any registered from outside."""
    return list(METHODS)


def get_method(name: str) -> Method:
    """The method registered as `name`, or a one-line error listing the known ones."""
    return METHODS.get(name)


def make_config(name: str, options: Mapping[str, Any] | None = None) -> MethodConfig:
    """Build and validate `name`'s config from plain options (from Python, YAML or JSON).

    Every option's type is checked against the config's field types before the config's own
    range checks run.
    """
    config_class = get_method(name).config_class
    options = dict(options or {})
    known = [f.name for f in fields(config_class)]
    unknown = sorted(set(options) - set(known))
    if unknown:
        raise ConfigError(
            f"{name}: unknown option {unknown[0]!r}; options: {', '.join(known) or 'none'}"
        )
    hints = get_type_hints(config_class)
    for option, value in options.items():
        if isinstance(value, list):
            options[option] = tuple(value)
        if not _matches(options[option], hints[option]):
            expected = _describe(hints[option])
            raise ConfigError(f"{name}: option {option} must be {expected}, got {value!r}")
    return config_class(**options)


def _matches(value: object, hint: Any) -> bool:
    """Whether a plain value fits a config field's type (bool is not an int here)."""
    if get_origin(hint) in (Union, types.UnionType):
        return any(_matches(value, option) for option in get_args(hint))
    if hint is type(None):
        return value is None
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        number = isinstance(value, int | float) and not isinstance(value, bool)
        return number and math.isfinite(value)  # type: ignore[arg-type]
    if hint is str:
        return isinstance(value, str)
    if get_origin(hint) is tuple:
        item = get_args(hint)[0]
        return isinstance(value, tuple) and all(_matches(v, item) for v in value)
    return True


_KINDS = {bool: "true or false", int: "an integer", float: "a finite number", str: "a string"}


def _describe(hint: Any) -> str:
    """A config field's type in words: `int | None` -> 'an integer or null'."""
    if get_origin(hint) in (Union, types.UnionType):
        return " or ".join(_describe(option) for option in get_args(hint))
    if hint is type(None):
        return "null"
    if get_origin(hint) is tuple:
        return f"a list ({_describe(get_args(hint)[0])} each)"
    return _KINDS.get(hint, str(hint))
