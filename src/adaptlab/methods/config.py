"""Base class and checks shared by every method's frozen config dataclass."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, ClassVar

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
    """A method's options; subclasses are frozen dataclasses validated on construction."""

    name: ClassVar[str]
    default_learning_rate: ClassVar[float] = ADAPTER_LR

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
