"""Freeze the embeddings and the first k blocks; the rest trains (MultiEURLEX slides)."""

from __future__ import annotations

from dataclasses import dataclass

from torch import nn

from adaptlab.backbone import Backbone
from adaptlab.methods.config import FINE_TUNING_LR, MethodConfig, require
from adaptlab.methods.params import parameters_under, pretrained_names
from adaptlab.methods.registry import Method, register
from adaptlab.methods.results import ApplyContext, MethodResult


@dataclass(frozen=True)
class FreezeConfig(MethodConfig):
    """k: number of bottom blocks frozen with the embeddings (slides: 3, 6, 9, 12)."""

    name = "freeze"
    default_learning_rate = FINE_TUNING_LR
    k: int = 3

    def __post_init__(self) -> None:
        ok = isinstance(self.k, int) and not isinstance(self.k, bool) and self.k >= 0
        require(ok, "freeze", f"k must be an integer >= 0, got {self.k!r}")


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


register(Method("freeze", FreezeConfig, apply, "embeddings and first k blocks frozen, rest trains"))
