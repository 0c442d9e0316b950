"""Parallel adapter beside the FFN: h + s * f2(act(f1(x))) from the FFN input x.

He et al. 2022, "Towards a Unified View of Parameter-Efficient Transfer Learning" (papers
list): the FFN-side parallel adapter with scaling s = 4 was their best placement.
"""

from __future__ import annotations

from torch import nn

from adaptlab.backbone.parts import Backbone
from adaptlab.methods.bottleneck import ParallelAdapter
from adaptlab.methods.configs.parallel import ParallelConfig
from adaptlab.methods.results import ApplyContext, MethodResult
from adaptlab.methods.site import Insertion


def apply(
    model: nn.Module, backbone: Backbone, config: ParallelConfig, ctx: ApplyContext
) -> MethodResult:
    return insert_parallel(backbone, config, ctx, "parallel")


def insert_parallel(
    backbone: Backbone, config: ParallelConfig, ctx: ApplyContext, method: str
) -> MethodResult:
    """A parallel adapter beside every block's FFN (`method` names it in errors)."""
    ctx.check_bottleneck(method, config.hidden_size, backbone)
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
