"""(IA)3: learned vectors that rescale the keys, the values and the FFN's intermediate activation.

Liu et al. 2022 ("Few-Shot Parameter-Efficient Fine-Tuning is Better and Cheaper than In-Context
Learning", §3.3): attention becomes softmax(Q (l_k ⊙ K^T) / sqrt(d_k)) (l_v ⊙ V), and the FFN
(l_ff ⊙ γ(W_1 x)) W_2. The keys and values are the key and value projections' outputs; the FFN's
intermediate activation is the input of its output projection (for a gated FFN, the product
of gate and up projections). Every vector starts at one, so the model is exactly unchanged at
initialisation. The vectors fold into the weights (`adaptlab.merge`): the rows of W_k, W_v and
their biases times l_k, l_v, the columns of W_2 times l_ff; unmerging divides them out again.
Defaults: all three targets, learning rate 3e-3 (Liu et al. §3.3, T-Few).
"""

from __future__ import annotations

import torch
from torch import nn

from adaptlab.backbone.parts import Backbone, get_module
from adaptlab.errors import ConfigError
from adaptlab.methods.configs.ia3 import TARGETS, IA3Config
from adaptlab.methods.results import ApplyContext, MethodResult
from adaptlab.methods.site import InputModule, Insertion, SiteModule


def _refuse_zero(scale: torch.Tensor, layer: str) -> None:
    if bool((scale == 0).any()):
        raise ConfigError(f"ia3: a scale of {layer} is exactly 0; it cannot be merged and unmerged")


class ScaleOutput(SiteModule):
    """l ⊙ h: the output of a key or value projection, rescaled per feature."""

    mergeable = True
    common_start = 1.0

    def __init__(self, width: int) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.ones(width))

    def output(self, h: torch.Tensor, x: torch.Tensor, site: nn.Module) -> torch.Tensor:
        return h * self.scale

    @torch.no_grad()
    def merge_into(self, layer: nn.Module) -> None:
        """W <- diag(l) W, b <- l ⊙ b."""
        assert isinstance(layer, nn.Linear)
        _refuse_zero(self.scale, "a key or value projection")
        layer.weight.mul_(self.scale.to(layer.weight.dtype)[:, None])
        if layer.bias is not None:
            layer.bias.mul_(self.scale.to(layer.bias.dtype))

    @torch.no_grad()
    def unmerge_from(self, layer: nn.Module) -> None:
        assert isinstance(layer, nn.Linear)
        layer.weight.div_(self.scale.to(layer.weight.dtype)[:, None])
        if layer.bias is not None:
            layer.bias.div_(self.scale.to(layer.bias.dtype))


class ScaleInput(InputModule):
    """l ⊙ x: the input of the FFN output projection (its intermediate activation), rescaled."""

    mergeable = True
    common_start = 1.0

    def __init__(self, width: int) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.ones(width))

    def rewrite(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.scale

    @torch.no_grad()
    def merge_into(self, layer: nn.Module) -> None:
        """W_2 <- W_2 diag(l_ff)."""
        assert isinstance(layer, nn.Linear)
        _refuse_zero(self.scale, "an FFN activation")
        layer.weight.mul_(self.scale.to(layer.weight.dtype)[None, :])

    @torch.no_grad()
    def unmerge_from(self, layer: nn.Module) -> None:
        assert isinstance(layer, nn.Linear)
        layer.weight.div_(self.scale.to(layer.weight.dtype)[None, :])


def apply(
    model: nn.Module, backbone: Backbone, config: IA3Config, ctx: ApplyContext
) -> MethodResult:
    result = MethodResult()
    for target in config.targets:
        for name in backbone.modules_with_role(TARGETS[target]):
            layer = get_module(model, name)
            if not isinstance(layer, nn.Linear):
                raise ConfigError(f"ia3: {name!r} is a {type(layer).__name__}, not a linear layer")
            module: SiteModule = (
                ScaleInput(layer.in_features)
                if target == "ffn"
                else ScaleOutput(layer.out_features)
            )
            result.insertions.append(Insertion(name, module))
    return result
