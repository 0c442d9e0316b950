"""Ladder Side-Tuning's options (Sung et al. 2022, §3.1, §4.1: r = 8, gate temperature 0.1,
side dropout 0.1; lr 3e-3); the method is `adaptlab.methods.lst`."""

from __future__ import annotations

from dataclasses import dataclass

from adaptlab.methods.config import MethodConfig, check_positive_int, require
from adaptlab.methods.registry import Method, register

LST_LR = 3e-3
"""Sung et al. 2022 §4.1: learning rate 3e-3 for LST."""


@dataclass(frozen=True)
class LSTConfig(MethodConfig):
    """reduction_factor r (side width d / r); gate_temperature T; dropout in the side layers."""

    name = "lst"
    default_learning_rate = LST_LR
    reduction_factor: int = 8
    gate_temperature: float = 0.1
    dropout: float = 0.1

    def __post_init__(self) -> None:
        check_positive_int("lst", "reduction_factor", self.reduction_factor)
        require(
            self.gate_temperature > 0,
            "lst",
            f"gate_temperature must be > 0, got {self.gate_temperature!r}",
        )
        require(0 <= self.dropout < 1, "lst", f"dropout must be in [0, 1), got {self.dropout!r}")


register(
    Method(
        "lst",
        LSTConfig,
        "Ladder Side-Tuning: a side network r times narrower reads the frozen blocks (+ head)",
        "adaptlab.methods.lst",
        exclusive=True,
    )
)
