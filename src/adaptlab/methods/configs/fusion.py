"""AdapterFusion's options (Pfeiffer et al. 2021) and how listings show it.

Fusion is not a method an adapter is made of: its layers train over adapters already
trained, which stay frozen (`adaptlab.add_fusion`; the layers are `adaptlab.methods.fusion`).
A run carries it in `RunSpec.fusion`; users write it as the method `fusion` with the adapters
it fuses (`--method fusion --adapters A,B`, `{fusion: {adapters: [...]}}` in a study).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from adaptlab.methods.config import MethodConfig, build_config, require

FUSION = "fusion"
"""How users and records name fusion where they name a method."""

FUSION_LR = 5e-5
"""Learning rate of the fusion layers (Pfeiffer et al. 2021, §4.2)."""

NOT_A_METHOD = (
    "an adapter is made of methods, and fusion is not one of its methods: it trains over "
    "adapters already trained (adaptlab train --method fusion --adapters RUN,RUN,..., or "
    "adaptlab.add_fusion(model, Fuse(...)))"
)


@dataclass(frozen=True)
class FusionConfig(MethodConfig):
    """temperature T of the softmax; value_regularization lambda (the paper's regulariser of
    V towards the identity, 0.01 as in the authors' dynamic fusion; 0: off); init_std of Q
    and K."""

    name = FUSION
    default_learning_rate = FUSION_LR
    temperature: float = 1.0
    value_regularization: float = 0.01
    init_std: float = 0.02

    def __post_init__(self) -> None:
        for option in ("temperature", "value_regularization", "init_std"):
            value = getattr(self, option)
            ok = isinstance(value, int | float) and not isinstance(value, bool)
            require(ok and math.isfinite(value), FUSION, f"{option} must be a number")
        require(self.temperature > 0, FUSION, f"temperature must be > 0, got {self.temperature}")
        require(
            self.value_regularization >= 0,
            FUSION,
            f"value_regularization must be >= 0, got {self.value_regularization}",
        )
        require(self.init_std >= 0, FUSION, f"init_std must be >= 0, got {self.init_std}")


def fusion_config(options: Mapping[str, Any] | None = None) -> FusionConfig:
    """FusionConfig from plain options (from Python, YAML or JSON), every option checked."""
    return build_config(FusionConfig, options)


@dataclass(frozen=True)
class FusionEntry:
    """Fusion as listings show it, beside the registered methods."""

    name: str
    config_class: type[FusionConfig]
    description: str


FUSION_ENTRY = FusionEntry(
    FUSION,
    FusionConfig,
    "AdapterFusion: attention over trained adapters (--adapters), which stay frozen",
)
