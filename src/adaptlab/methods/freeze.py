"""Freeze the embeddings and the first k blocks; the rest trains (MultiEURLEX slides)."""

from __future__ import annotations

from torch import nn

from adaptlab.backbone.parts import Backbone
from adaptlab.methods.config import require
from adaptlab.methods.configs.freeze import FreezeConfig
from adaptlab.methods.params import parameters_under, pretrained_names
from adaptlab.methods.results import ApplyContext, MethodResult


def apply(
    model: nn.Module, backbone: Backbone, config: FreezeConfig, ctx: ApplyContext
) -> MethodResult:
    require(
        config.k <= backbone.num_blocks,
        "freeze",
        f"k={config.k} exceeds the {backbone.num_blocks} blocks of {backbone.model_class}",
    )
    frozen = parameters_under(
        model, [backbone.embeddings, *(b.name for b in backbone.blocks[: config.k])]
    )
    head = parameters_under(model, backbone.head)
    return MethodResult(groups={f"blocks {config.k}+": pretrained_names(model) - frozen - head})
