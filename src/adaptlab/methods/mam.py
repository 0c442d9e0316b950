"""The MAM adapter: prefix tuning at attention and a scaled parallel adapter at the FFN.

He et al. 2022 ("Towards a Unified View of Parameter-Efficient Transfer Learning", §4.5): of
the design elements they compare, modifying the FFN with a parallel adapter scaled by s = 4
uses a parameter budget best, and a small prefix at attention (l = 30) adds what the FFN
alone misses; MAM ("Mix-And-Match") is that combination, with r = 512 for the FFN side. Here
it is one named method with those defaults: the prefix part is `prefix` (reparameterised while
training, folded away when saved) and the FFN part is `parallel`.
"""

from __future__ import annotations

from torch import nn

from adaptlab.backbone.parts import Backbone
from adaptlab.methods.configs.mam import MAMConfig
from adaptlab.methods.parallel import insert_parallel
from adaptlab.methods.prefix import insert_prefixes
from adaptlab.methods.results import ApplyContext, MethodResult


def apply(
    model: nn.Module, backbone: Backbone, config: MAMConfig, ctx: ApplyContext
) -> MethodResult:
    prefix, parallel = config.parts()
    result = insert_parallel(backbone, parallel, ctx, "mam")
    result.insertions[:0] = insert_prefixes(model, backbone, prefix, ctx, "mam")
    return result
