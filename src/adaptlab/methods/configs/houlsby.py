"""Houlsby adapters' options (paper-effectiveness §2.1, §3.2: m = 64, tanh, LayerNorms train);
the method is `adaptlab.methods.houlsby`."""

from __future__ import annotations

from dataclasses import dataclass

from adaptlab.methods.config import MethodConfig, check_activation, check_positive_int, require
from adaptlab.methods.registry import Method, register

SITES = ("attention_out", "ffn_out")


@dataclass(frozen=True)
class HoulsbyConfig(MethodConfig):
    """hidden_size: bottleneck m; train_norms: LayerNorms train as in the paper."""

    name = "houlsby"
    generation_learning_rate = 1e-3  # examples/generative-defaults.yaml (docs/generative.md)
    hidden_size: int = 64
    activation: str = "tanh"
    init_std: float = 1e-2
    train_norms: bool = True

    def __post_init__(self) -> None:
        check_positive_int("houlsby", "hidden_size", self.hidden_size)
        check_activation("houlsby", self.activation)
        require(self.init_std >= 0, "houlsby", f"init_std must be >= 0, got {self.init_std!r}")


register(
    Method(
        "houlsby",
        HoulsbyConfig,
        "two bottleneck adapters per block (after attention and FFN) + LayerNorms",
        "adaptlab.methods.houlsby",
        sites=lambda config: frozenset(SITES),
    )
)
