"""Freezing's option: how many bottom blocks stay frozen (MultiEURLEX slides); the method is
`adaptlab.methods.freeze`."""

from __future__ import annotations

from dataclasses import dataclass

from adaptlab.methods.config import FINE_TUNING_LR, MethodConfig, require
from adaptlab.methods.registry import Method, register


@dataclass(frozen=True)
class FreezeConfig(MethodConfig):
    """k: number of bottom blocks frozen with the embeddings (slides: 3, 6, 9, 12)."""

    name = "freeze"
    default_learning_rate = FINE_TUNING_LR
    k: int = 3

    def __post_init__(self) -> None:
        ok = isinstance(self.k, int) and not isinstance(self.k, bool) and self.k >= 0
        require(ok, "freeze", f"k must be an integer >= 0, got {self.k!r}")


register(
    Method(
        "freeze",
        FreezeConfig,
        "embeddings and first k blocks frozen, rest trains",
        "adaptlab.methods.freeze",
        trains_base_weights=True,
    )
)
