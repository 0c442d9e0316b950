"""LN-tuning: only LayerNorm / RMSNorm parameters train, with the task head."""

from __future__ import annotations

from torch import nn

from adaptlab.backbone.parts import Backbone
from adaptlab.methods.configs.lnfit import LNFitConfig
from adaptlab.methods.params import norm_names
from adaptlab.methods.results import ApplyContext, MethodResult


def apply(
    model: nn.Module, backbone: Backbone, config: LNFitConfig, ctx: ApplyContext
) -> MethodResult:
    return MethodResult.outside_head(
        "lnfit", "norms", norm_names(model), model, backbone, "LayerNorm or RMSNorm parameters"
    )
