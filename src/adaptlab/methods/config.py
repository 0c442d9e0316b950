"""Base class and checks shared by every method's frozen config dataclass (and fusion's), and
building one from plain options. Configs load no torch: records are read through them."""

from __future__ import annotations

import math
import types
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, ClassVar, TypeVar, Union, get_args, get_origin, get_type_hints

from adaptlab.errors import ConfigError

FINE_TUNING_LR = 2e-5
"""Learning rate for methods that update pretrained weights (paper-effectiveness App. A.2)."""
ADAPTER_LR = 1e-4
"""Learning rate for methods that train few parameters (paper-effectiveness App. A.2)."""

ACTIVATIONS = ("tanh", "relu", "gelu", "swish")

ADDED = {"added": True}
"""Metadata of an option added to a method after adaptlab 0.1.0: `to_dict` writes it only when
it differs from its default, so the run ids of existing runs (a hash of their configs) stay
the same and their stores keep resuming."""


@dataclass(frozen=True)
class MethodConfig:
    """A method's options (or fusion's); subclasses are frozen dataclasses validated on
    construction. `name` is what records write beside the options."""

    name: ClassVar[str]
    default_learning_rate: ClassVar[float] = ADAPTER_LR
    generation_learning_rate: ClassVar[float | None] = None
    """The default for tasks that generate text (sft, chat, seq2seq), measured by
    examples/generative-defaults.yaml (docs/generative.md); None: `default_learning_rate`."""

    @classmethod
    def generation_defaults(cls, options: Mapping[str, Any]) -> dict[str, Any]:
        """`options` as a task that generates text takes them, the method's generation
        defaults filled in where `options` leave them out (most methods have none)."""
        return dict(options)

    @classmethod
    def learning_rate_default(cls, generates: bool) -> float:
        """The method's default learning rate for a task that generates text or one that
        does not."""
        if generates and cls.generation_learning_rate is not None:
            return cls.generation_learning_rate
        return cls.default_learning_rate

    def to_dict(self) -> dict[str, Any]:
        """Options as a JSON-ready mapping (tuples become lists; see `ADDED`)."""
        options = {}
        for option in fields(self):
            value = getattr(self, option.name)
            if option.metadata.get("added") and value == option.default:
                continue
            options[option.name] = list(value) if isinstance(value, tuple) else value
        return options

    def folded(self) -> MethodConfig:
        """The config of the method's saved form (prefix tuning saves its prefixes, not the
        MLP that made them); the same config for most methods."""
        return self


def require(condition: bool, method: str, message: str) -> None:
    """Raise a one-line ConfigError naming the method when `condition` is false."""
    if not condition:
        raise ConfigError(f"{method}: {message}")


def check_positive_int(method: str, option: str, value: object) -> None:
    """`value` must be an int >= 1 (bools are refused)."""
    ok = isinstance(value, int) and not isinstance(value, bool) and value >= 1
    require(ok, method, f"{option} must be a positive integer, got {value!r}")


def check_activation(method: str, value: object) -> None:
    """`value` must name a supported bottleneck activation."""
    require(
        value in ACTIVATIONS,
        method,
        f"activation must be one of {', '.join(ACTIVATIONS)}, got {value!r}",
    )


Config = TypeVar("Config", bound=MethodConfig)


def build_config(config_class: type[Config], options: Mapping[str, Any] | None = None) -> Config:
    """`config_class` from plain options (from Python, YAML or JSON).

    Every option's type is checked against the config's field types before the config's own
    range checks run; an unknown option is refused, naming the known ones.
    """
    name = config_class.name
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
