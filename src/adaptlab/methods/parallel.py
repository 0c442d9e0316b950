"""Parallel adapter beside the FFN: h + s * f2(act(f1(x))) from the FFN input x.

He et al. 2022, "Towards a Unified View of Parameter-Efficient Transfer Learning" (papers
list): the FFN-side parallel adapter with scaling s = 4 was their best placement.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import nn

from adaptlab.backbone import Backbone
from adaptlab.methods.bottleneck import ParallelAdapter
from adaptlab.methods.config import MethodConfig, check_activation, check_positive_int, require
from adaptlab.methods.registry import Method, register
from adaptlab.methods.results import ApplyContext, MethodResult
from adaptlab.methods.site import Insertion

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


def apply(
    model: nn.Module, backbone: Backbone, config: ParallelConfig, ctx: ApplyContext
) -> MethodResult:
    ctx.check_bottleneck("parallel", config.hidden_size, backbone)
    result = MethodResult()
    for block in backbone.blocks:
        adapter = ParallelAdapter(
            backbone.hidden_size,
            config.hidden_size,
            config.activation,
            config.init_std,
            ctx.generator(block.ffn_out),
            scale=config.scale,
        )
        result.insertions.append(Insertion(block.ffn_out, adapter, reads=block.ffn_in[0]))
    return result


register(
    Method(
        "parallel",
        ParallelConfig,
        apply,
        "parallel adapter beside the FFN, scaled by s",
        sites=lambda config: frozenset(SITES),
    )
)
