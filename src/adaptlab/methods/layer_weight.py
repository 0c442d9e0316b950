"""A linear layer's weight as (out, in), whatever its orientation or storage."""

from __future__ import annotations

import torch
from torch import nn

from adaptlab.backbone.linear import out_in_weight
from adaptlab.models.quantize import dense_weight, layer_kind


def weight_matrix(layer: nn.Module) -> torch.Tensor:
    """`layer`'s weight as (out, in): the de-quantised weight of a quantised layer, else the
    layer's own (a view of a Conv1D's: writing it writes the layer)."""
    if layer_kind(layer) is not None:
        assert isinstance(layer, nn.Linear)
        return dense_weight(layer)
    return out_in_weight(layer)
