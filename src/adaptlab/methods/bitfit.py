"""BitFit: only the bias terms train (Ben Zaken et al. 2022), with the task head."""

from __future__ import annotations

from torch import nn

from adaptlab.backbone.parts import Backbone
from adaptlab.methods.configs.bitfit import BitFitConfig
from adaptlab.methods.params import bias_names
from adaptlab.methods.results import ApplyContext, MethodResult


def apply(
    model: nn.Module, backbone: Backbone, config: BitFitConfig, ctx: ApplyContext
) -> MethodResult:
    return MethodResult.outside_head(
        "bitfit", "biases", bias_names(model), model, backbone, "bias terms outside its head"
    )
