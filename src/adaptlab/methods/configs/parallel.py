"""The parallel adapter's options (He et al. 2022: beside the FFN, scaled by s = 4); the method
is `adaptlab.methods.parallel`."""

from __future__ import annotations

from dataclasses import dataclass

from adaptlab.methods.config import MethodConfig, check_activation, check_positive_int, require
from adaptlab.methods.registry import Method, register

SITES = ("ffn_out",)


@dataclass(frozen=True)
class ParallelConfig(MethodConfig):
    """hidden_size: bottleneck m; scale: s multiplying the branch."""

    name = "parallel"
    hidden_size: int = 64
    scale: float = 4.0
    activation: str = "relu"
    init_std: float = 1e-2

    def __post_init__(self) -> None:
        check_positive_int("parallel", "hidden_size", self.hidden_size)
        check_activation("parallel", self.activation)
        require(self.scale > 0, "parallel", f"scale must be > 0, got {self.scale!r}")
        require(self.init_std >= 0, "parallel", f"init_std must be >= 0, got {self.init_std!r}")


register(
    Method(
        "parallel",
        ParallelConfig,
        "parallel adapter beside the FFN, scaled by s",
        "adaptlab.methods.parallel",
        sites=lambda config: frozenset(SITES),
    )
)
