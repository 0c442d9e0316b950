"""How much a trained AdapterFusion attends to each adapter, averaged over a data set.

As in Pfeiffer et al. 2021 (AdapterFusion, the activation figure on the slides): the softmax
weight of every adapter at every fusion layer, averaged over all (non-padding) tokens of
every example.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from adaptlab.backbone.roles import ROLES
from adaptlab.data.encoding import TextEncoder
from adaptlab.engine.batches import batches
from adaptlab.methods.handle import AdaptHandle
from adaptlab.records.result import SiteWeights


@torch.no_grad()
def mean_fusion_weights(
    model: nn.Module,
    fusion: AdaptHandle,
    encoder: TextEncoder,
    features: Sequence[dict[str, Any]],
    batch_size: int = 64,
) -> tuple[SiteWeights, ...]:
    """Each site's mean weight per fused adapter over every real token of `features`."""
    device = next(model.parameters()).device
    sums = {
        site: torch.zeros(len(fusion.fused), dtype=torch.float64) for site in fusion.fusion_layers
    }
    tokens = 0
    model.eval()
    for batch in batches(encoder, features, batch_size, device):
        model(**batch)
        mask = batch["attention_mask"].to(torch.float64)
        tokens += int(mask.sum().item())
        for site, layer in fusion.fusion_layers.items():
            weights = layer.last_weights
            assert weights is not None
            sums[site] += torch.einsum("btn,bt->n", weights.to(torch.float64).cpu(), mask.cpu())
    roles = {
        name: (block.index, role)
        for block in fusion.backbone.blocks
        for role in ROLES
        for name in block.role(role)
    }
    return tuple(
        SiteWeights(
            site=site,
            block=roles[site][0],
            role=roles[site][1],
            weights={
                n: float(v) / max(tokens, 1) for n, v in zip(fusion.fused, total, strict=True)
            },
        )
        for site, total in sums.items()
    )
