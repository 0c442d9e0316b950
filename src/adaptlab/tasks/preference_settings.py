"""What a preference run reads from its spec's data options, checked once: the objective's beta,
DPO's loss and whether its reference is computed before training, SimPO's margin, and the
generation options its dev and test generate by (`GenerativeSettings`). Every value is part of
the run's id."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from adaptlab.checks import shown
from adaptlab.errors import ConfigError
from adaptlab.tasks.generative_settings import GENERATIVE_OPTIONS, GenerativeSettings

DPO_LOSSES = ("sigmoid", "ipo", "hinge")
"""DPO's losses: the paper's sigmoid (Rafailov et al. 2023, Eq. 7), IPO's squared loss (Azar et
al. 2023, Eq. 17) and SLiC's hinge (Zhao et al. 2023)."""
SIMPO_GAMMA = 1.0
"""SimPO's target reward margin unless the run says (gamma / beta 0.5 at beta 2.0)."""


class PreferenceFacts(Protocol):
    """What the settings read of a preference task (`adaptlab.tasks.preference`'s)."""

    @property
    def name(self) -> str: ...

    @property
    def beta_default(self) -> float: ...


PREFERENCE_KEYS = (
    "beta",
    "loss",
    "simpo_gamma",
    "precompute_reference",
    "desirable_weight",
    "undesirable_weight",
)


@dataclass(frozen=True)
class PreferenceSettings:
    """The data options of a preference run, validated."""

    generative: GenerativeSettings
    beta: float
    loss: str = "sigmoid"
    simpo_gamma: float = SIMPO_GAMMA
    precompute_reference: bool = False
    desirable_weight: float = 1.0
    undesirable_weight: float = 1.0
    """KTO's weights of the desirable and undesirable answers' losses (Ethayarajh et al. 2024,
    Eq. 8: lambda_D, lambda_U)."""

    @classmethod
    def of(cls, options: Mapping[str, Any], task: PreferenceFacts) -> PreferenceSettings:
        """`options` (a spec's `data_options`) for `task`; a value of the wrong type or range
        is one line naming it (an option the task does not read was refused before)."""
        generative = {k: v for k, v in options.items() if k in ("task", *GENERATIVE_OPTIONS)}
        loss = options.get("loss", "sigmoid")
        if loss not in DPO_LOSSES:
            raise ConfigError(f"loss must be one of {', '.join(DPO_LOSSES)}, got {shown(loss)}")
        precompute = options.get("precompute_reference", False)
        if not isinstance(precompute, bool):
            raise ConfigError(
                f"precompute_reference must be true or false, got {shown(precompute)}"
            )
        return cls(
            generative=GenerativeSettings.of(generative, task.name),
            beta=_positive(options, "beta", task.beta_default),
            loss=loss,
            simpo_gamma=_non_negative(options, "simpo_gamma", SIMPO_GAMMA),
            precompute_reference=precompute,
            desirable_weight=_positive(options, "desirable_weight", 1.0),
            undesirable_weight=_positive(options, "undesirable_weight", 1.0),
        )


def _number(options: Mapping[str, Any], key: str, default: float) -> float:
    value = options.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ConfigError(f"{key} must be a finite number, got {shown(value)}")
    return float(value)


def _non_negative(options: Mapping[str, Any], key: str, default: float) -> float:
    value = _number(options, key, default)
    if value < 0:
        raise ConfigError(f"{key} must be at least 0, got {shown(options.get(key))}")
    return value


def _positive(options: Mapping[str, Any], key: str, default: float) -> float:
    value = _number(options, key, default)
    if value <= 0:
        raise ConfigError(f"{key} must be above 0, got {shown(options.get(key))}")
    return value
