"""Linear layers of either orientation: `nn.Linear` (weight out x in) and transformers'
`Conv1D` (GPT-2's, weight in x out, y = x W + b). Methods read and write a layer's weight
as (out, in) through `adaptlab.methods.layer_weight`, so one code path serves both."""

from __future__ import annotations

import torch
from torch import nn


def is_conv1d(module: nn.Module) -> bool:
    """transformers' `Conv1D` (GPT-2, GPT-BigCode, OpenAI GPT): a linear layer stored in x out."""
    return type(module).__name__ == "Conv1D" and hasattr(module, "nf") and hasattr(module, "nx")


def is_linear(module: nn.Module) -> bool:
    """A linear layer of either orientation (a quantised `nn.Linear` counts)."""
    return isinstance(module, nn.Linear) or is_conv1d(module)


def features(layer: nn.Module) -> tuple[int, int]:
    """(in, out) widths of a linear layer of either orientation."""
    if is_conv1d(layer):
        return int(layer.nx), int(layer.nf)  # type: ignore[arg-type]
    assert isinstance(layer, nn.Linear), type(layer).__name__
    return layer.in_features, layer.out_features


def out_in_weight(layer: nn.Module) -> torch.Tensor:
    """A float linear layer's weight as (out, in): a view of a Conv1D's (writing it writes the
    layer), the weight itself for an `nn.Linear`."""
    weight = layer.weight
    assert isinstance(weight, torch.Tensor), type(layer).__name__
    return weight.T if is_conv1d(layer) else weight


def input_dim(layer: nn.Module) -> int:
    """The dimension of `layer.weight` that runs over its inputs (1 for nn.Linear, 0 for Conv1D)."""
    return 0 if is_conv1d(layer) else 1
