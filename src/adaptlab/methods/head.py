"""Linear probe: the body is frozen and only the task head trains."""

from __future__ import annotations

from torch import nn

from adaptlab.backbone.parts import Backbone
from adaptlab.errors import ConfigError
from adaptlab.methods.configs.head import HeadConfig
from adaptlab.methods.params import head_parameters
from adaptlab.methods.results import ApplyContext, MethodResult


def apply(
    model: nn.Module, backbone: Backbone, config: HeadConfig, ctx: ApplyContext
) -> MethodResult:
    if not backbone.head:
        raise ConfigError(f"head: {backbone.model_class} has no task head to train")
    if not head_parameters(model, backbone.head):
        raise ConfigError(
            f"head: the head of {backbone.model_class} ({', '.join(backbone.head)}) is tied to "
            "its input embeddings and has no weights of its own to train"
        )
    return MethodResult()  # the head group is added by `adapt` for every method
