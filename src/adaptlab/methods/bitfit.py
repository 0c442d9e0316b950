"""BitFit: only the bias terms train (Ben Zaken et al. 2022), with the task head."""

from __future__ import annotations

from torch import nn

from adaptlab.backbone.parts import Backbone
from adaptlab.errors import ConfigError
from adaptlab.methods.configs.bitfit import BitFitConfig
from adaptlab.methods.params import bias_names, parameters_under
from adaptlab.methods.results import ApplyContext, MethodResult


def apply(
    model: nn.Module, backbone: Backbone, config: BitFitConfig, ctx: ApplyContext
) -> MethodResult:
    biases = bias_names(model) - parameters_under(model, backbone.head)
    if not biases:
        raise ConfigError(f"bitfit: {backbone.model_class} has no bias terms outside its head")
    return MethodResult(groups={"biases": biases})
