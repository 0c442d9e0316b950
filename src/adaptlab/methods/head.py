"""Linear probe: the body is frozen and only the task head trains."""

from __future__ import annotations

from dataclasses import dataclass

from torch import nn

from adaptlab.backbone import Backbone
from adaptlab.errors import ConfigError
from adaptlab.methods.config import MethodConfig
from adaptlab.methods.registry import Method, register
from adaptlab.methods.results import ApplyContext, MethodResult


@dataclass(frozen=True)
class HeadConfig(MethodConfig):
    """The head alone trains; it has no options."""

    name = "head"


def apply(
    model: nn.Module, backbone: Backbone, config: HeadConfig, ctx: ApplyContext
) -> MethodResult:
    if not backbone.head:
        raise ConfigError(f"head: {backbone.model_class} has no task head to train")
    return MethodResult()  # the head group is added by `adapt` for every method


register(
    Method("head", HeadConfig, apply, "linear probe: body frozen, task head trains", exclusive=True)
)
