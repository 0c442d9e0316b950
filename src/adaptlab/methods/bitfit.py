"""BitFit: only the bias terms train (Ben Zaken et al. 2022), with the task head."""

from __future__ import annotations

from dataclasses import dataclass

from torch import nn

from adaptlab.backbone import Backbone
from adaptlab.errors import ConfigError
from adaptlab.methods.config import MethodConfig
from adaptlab.methods.params import bias_names, parameters_under
from adaptlab.methods.registry import Method, register
from adaptlab.methods.results import ApplyContext, MethodResult


@dataclass(frozen=True)
class BitFitConfig(MethodConfig):
    """BitFit has no options."""

    name = "bitfit"


def apply(
    model: nn.Module, backbone: Backbone, config: BitFitConfig, ctx: ApplyContext
) -> MethodResult:
    biases = bias_names(model) - parameters_under(model, backbone.head)
    if not biases:
        raise ConfigError(f"bitfit: {backbone.model_class} has no bias terms outside its head")
    return MethodResult(groups={"biases": biases})


register(Method("bitfit", BitFitConfig, apply, "bias terms only (+ head)"))
