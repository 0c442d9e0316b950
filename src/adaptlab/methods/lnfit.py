"""LN-tuning: only LayerNorm / RMSNorm parameters train, with the task head."""

from __future__ import annotations

from torch import nn

from adaptlab.backbone.parts import Backbone
from adaptlab.errors import ConfigError
from adaptlab.methods.configs.lnfit import LNFitConfig
from adaptlab.methods.params import norm_names, parameters_under
from adaptlab.methods.results import ApplyContext, MethodResult


def apply(
    model: nn.Module, backbone: Backbone, config: LNFitConfig, ctx: ApplyContext
) -> MethodResult:
    norms = norm_names(model) - parameters_under(model, backbone.head)
    if not norms:
        raise ConfigError(f"lnfit: {backbone.model_class} has no LayerNorm or RMSNorm parameters")
    return MethodResult(groups={"norms": norms})
