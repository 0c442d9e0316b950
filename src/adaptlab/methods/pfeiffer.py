"""Pfeiffer adapters: one bottleneck per block, after the FFN (slides-adapters; AdapterFusion).

Pfeiffer et al. 2021 keep only the FFN-side adapter, with ReLU and a reduction factor of 16
(bottleneck d / 16); the pretrained LayerNorms stay frozen. `invertible=True` adds MAD-X's
invertible adapter on the embeddings (`adaptlab.methods.invertible`), for language adapters.
"""

from __future__ import annotations

from torch import nn

from adaptlab.backbone.parts import Backbone
from adaptlab.methods.bottleneck import insert_sequential
from adaptlab.methods.configs.pfeiffer import SITES, PfeifferConfig
from adaptlab.methods.invertible import invertible_insertions
from adaptlab.methods.params import norm_names, parameters_under
from adaptlab.methods.results import ApplyContext, MethodResult


def apply(
    model: nn.Module, backbone: Backbone, config: PfeifferConfig, ctx: ApplyContext
) -> MethodResult:
    size = config.bottleneck_size(backbone.hidden_size)
    result = insert_sequential(
        backbone, "pfeiffer", SITES, size, config.activation, config.init_std, ctx
    )
    if config.invertible:
        result.insertions += invertible_insertions(
            model, backbone, "pfeiffer", config.invertible_reduction_factor, config.init_std, ctx
        )
    if config.train_norms:
        result.groups["norms"] = norm_names(model) - parameters_under(model, backbone.head)
    return result
