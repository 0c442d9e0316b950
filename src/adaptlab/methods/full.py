"""Full fine-tuning: every parameter trains."""

from __future__ import annotations

from dataclasses import dataclass

from torch import nn

from adaptlab.backbone import Backbone
from adaptlab.methods.config import FINE_TUNING_LR, MethodConfig
from adaptlab.methods.params import pretrained_names
from adaptlab.methods.registry import Method, register
from adaptlab.methods.results import ApplyContext, MethodResult


@dataclass(frozen=True)
class FullConfig(MethodConfig):
    """Full fine-tuning has no options (paper-effectiveness §3: lr 2e-5)."""

    name = "full"
    default_learning_rate = FINE_TUNING_LR


def apply(
    model: nn.Module, backbone: Backbone, config: FullConfig, ctx: ApplyContext
) -> MethodResult:
    return MethodResult(groups={"all": pretrained_names(model)})


register(Method("full", FullConfig, apply, "all parameters train", exclusive=True))
