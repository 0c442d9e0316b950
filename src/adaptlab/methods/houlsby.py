"""Houlsby adapters: two bottlenecks per block, after attention output and after the FFN.

paper-effectiveness §2.1, eq. 1: h' = f2(tanh(f1(h))) + h, inserted after each sub-layer's
output projection, before the residual add and LayerNorm. As in that paper the LayerNorms
and the classification layer train too; hidden size m in {64, 128, 256} (§3.2), lr 1e-4.
"""

from __future__ import annotations

from torch import nn

from adaptlab.backbone.parts import Backbone
from adaptlab.methods.bottleneck import insert_sequential
from adaptlab.methods.configs.houlsby import SITES, HoulsbyConfig
from adaptlab.methods.params import norm_names, parameters_under
from adaptlab.methods.results import ApplyContext, MethodResult


def apply(
    model: nn.Module, backbone: Backbone, config: HoulsbyConfig, ctx: ApplyContext
) -> MethodResult:
    result = insert_sequential(
        backbone, "houlsby", SITES, config.hidden_size, config.activation, config.init_std, ctx
    )
    if config.train_norms:
        result.groups["norms"] = norm_names(model) - parameters_under(model, backbone.head)
    return result
