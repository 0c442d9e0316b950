"""The method registry: every method registers its name, config class and `apply` once."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import Any

from torch import nn

from adaptlab.backbone import Backbone
from adaptlab.errors import ConfigError
from adaptlab.methods.config import MethodConfig
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


_REGISTRY: dict[str, Method] = {}


def register(method: Method) -> Method:
    """Add `method` to the registry under its name."""
    if method.name in _REGISTRY:
        raise ValueError(f"method {method.name!r} is registered twice")
    _REGISTRY[method.name] = method
    return method


def list_methods() -> list[Method]:
    """Every registered method, in registration order."""
    return list(_REGISTRY.values())


def get_method(name: str) -> Method:
    """The method registered as `name`, or a one-line error listing the known ones."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ConfigError(
            f"unknown method {name!r}; known methods: {', '.join(_REGISTRY)}"
        ) from None


def make_config(name: str, options: Mapping[str, Any] | None = None) -> MethodConfig:
    """Build and validate `name`'s config from plain options (from Python, YAML or JSON)."""
    method = get_method(name)
    options = dict(options or {})
    known = [f.name for f in fields(method.config_class)]
    unknown = sorted(set(options) - set(known))
    if unknown:
        raise ConfigError(
            f"{name}: unknown option {unknown[0]!r}; options: {', '.join(known) or 'none'}"
        )
    for f in fields(method.config_class):
        value = options.get(f.name)
        if isinstance(value, list):
            options[f.name] = tuple(value)
    return method.config_class(**options)
