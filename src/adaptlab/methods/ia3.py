"""(IA)3: learned vectors that rescale the keys, the values and the FFN's intermediate activation.

Liu et al. 2022 ("Few-Shot Parameter-Efficient Fine-Tuning is Better and Cheaper than In-Context
Learning", §3.3): attention becomes softmax(Q (l_k ⊙ K^T) / sqrt(d_k)) (l_v ⊙ V), and the FFN
(l_ff ⊙ γ(W_1 x)) W_2. The keys and values are the key and value projections' outputs; the FFN's
intermediate activation is the input of its output projection (for a gated FFN, the product
of gate and up projections). Every vector starts at one, so the model is exactly unchanged at
initialisation. The vectors fold into the weights (`adaptlab.merge`): the rows of W_k, W_v and
their biases times l_k, l_v, the columns of W_2 times l_ff; unmerging divides them out again.
Defaults: all three targets, learning rate 3e-3 (Liu et al. §3.3, T-Few).

On a fused query-key-value layer the key and value vectors scale the key's and the value's rows
of its output (`adaptlab.methods.sliced`). On a mixture of experts (Mixtral, Qwen-MoE) l_ff
scales each expert's intermediate activation, one vector per expert as (IA)3 gives every FFN
its own: the columns of each expert's down projection, through the experts' 3-D weight while
they run (`ExpertScale`).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from adaptlab.backbone.discovery import expert_width
from adaptlab.backbone.linear import features, is_linear
from adaptlab.backbone.parts import Backbone, BlockParts, Part, get_module
from adaptlab.backbone.rows import Rows
from adaptlab.errors import ConfigError
from adaptlab.methods.configs.ia3 import TARGETS, IA3Config
from adaptlab.methods.layer_weight import weight_matrix
from adaptlab.methods.results import ApplyContext, MethodResult
from adaptlab.methods.rowwise import RowWise
from adaptlab.methods.site import InputModule, Insertion, WeightModule
from adaptlab.methods.sliced import insert_parts


def _refuse_zero(scale: torch.Tensor, layer: str) -> None:
    if bool((scale == 0).any()):
        raise ConfigError(f"ia3: a scale of {layer} is exactly 0; it cannot be merged and unmerged")


class ScaleOutput(RowWise):
    """l ⊙ h: the output of a key or value projection (or its rows of a fused layer),
    rescaled per feature."""

    mergeable = True
    common_start = 1.0

    def __init__(self, width: int, rows: Rows | None = None) -> None:
        super().__init__(rows)
        self.scale = nn.Parameter(torch.ones(width if rows is None else rows.size))

    def output(self, h: torch.Tensor, x: torch.Tensor, site: nn.Module) -> torch.Tensor:
        if self.rows is None:
            return h * self.scale
        return self.put_rows(h, self.own_rows(h, dim=-1) * self.scale)

    @torch.no_grad()
    def merge_into(self, layer: nn.Module) -> None:
        """W <- diag(l) W, b <- l ⊙ b (on this module's rows)."""
        _refuse_zero(self.scale, "a key or value projection")
        self._rescale(layer, torch.mul)

    @torch.no_grad()
    def unmerge_from(self, layer: nn.Module) -> None:
        self._rescale(layer, torch.div)

    def _rescale(self, layer: nn.Module, op: Callable[..., torch.Tensor]) -> None:
        """This module's rows of the layer's weight and bias, multiplied or divided by l."""
        weight = weight_matrix(layer)
        self.put_rows_(weight, op(self.own_rows(weight), self.scale.to(weight.dtype)[:, None]))
        bias = getattr(layer, "bias", None)
        if bias is not None:
            self.put_rows_(bias, op(self.own_rows(bias), self.scale.to(bias.dtype)))


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
        _refuse_zero(self.scale, "an FFN activation")
        weight = weight_matrix(layer)
        weight.mul_(self.scale.to(weight.dtype)[None, :])

    @torch.no_grad()
    def unmerge_from(self, layer: nn.Module) -> None:
        weight = weight_matrix(layer)
        weight.div_(self.scale.to(weight.dtype)[None, :])


class ExpertScale(WeightModule):
    """l_ff of every expert of a mixture (E x intermediate): each expert's down projection,
    a 3-D weight, has its intermediate dimension rescaled while the experts run."""

    mergeable = True
    common_start = 1.0

    def __init__(self, parameter: str, experts: int, width: int, axis: int) -> None:
        super().__init__()
        self.parameter = parameter
        self.axis = axis  # the down projection's intermediate dimension: 1 or 2
        self.scale = nn.Parameter(torch.ones(experts, width))

    @classmethod
    def for_experts(cls, experts: nn.Module, name: str, hidden: int, inner: int) -> ExpertScale:
        """The scales of `experts` (named `name`): its down projection is the 3-D weight
        between the `inner` (intermediate) width and the `hidden` size."""
        weights = {n: p for n, p in experts.named_parameters(recurse=False) if p.dim() == 3}
        downs = [
            (n, tuple(p.shape[1:]).index(inner) + 1)
            for n, p in weights.items()
            if sorted(p.shape[1:]) == sorted((hidden, inner)) and hidden != inner
        ]
        if len(downs) != 1:
            raise ConfigError(
                f"ia3: cannot tell the down projection among the expert weights of {name!r} "
                f"({', '.join(f'{n} {tuple(p.shape)}' for n, p in weights.items())})"
            )
        (parameter, axis), count = downs[0], weights[downs[0][0]].shape[0]
        return cls(parameter, count, inner, axis)

    def _factor(self, dtype: torch.dtype) -> torch.Tensor:
        """The scales shaped to multiply the down projection's weight."""
        return self.scale.to(dtype).unsqueeze(3 - self.axis)

    def replace_weight(self, w: torch.Tensor) -> torch.Tensor:
        return w * self._factor(w.dtype)

    @torch.no_grad()
    def merge_into(self, layer: nn.Module) -> None:
        _refuse_zero(self.scale, "an expert's FFN activation")
        weight = getattr(layer, self.parameter)
        weight.mul_(self._factor(weight.dtype))

    @torch.no_grad()
    def unmerge_from(self, layer: nn.Module) -> None:
        weight = getattr(layer, self.parameter)
        weight.div_(self._factor(weight.dtype))


def apply(
    model: nn.Module, backbone: Backbone, config: IA3Config, ctx: ApplyContext
) -> MethodResult:
    outputs = [t for t in config.targets if t != "ffn"]
    parts = [part for t in outputs for part in backbone.parts_with_role(TARGETS[t])]
    result = MethodResult(insertions=insert_parts(parts, lambda part: _output_scale(model, part)))
    if "ffn" in config.targets:
        result.insertions += [_ffn_scale(model, block, backbone) for block in backbone.blocks]
    return result


def _linear(model: nn.Module, name: str) -> nn.Module:
    layer = get_module(model, name)
    if not is_linear(layer):
        raise ConfigError(f"ia3: {name!r} is a {type(layer).__name__}, not a linear layer")
    return layer


def _output_scale(model: nn.Module, part: Part) -> ScaleOutput:
    return ScaleOutput(features(_linear(model, part.module))[1], part.rows)


def _ffn_scale(model: nn.Module, block: BlockParts, backbone: Backbone) -> Insertion:
    """l_ff at one block: on the FFN output projection's input, or each expert's."""
    if block.experts is not None:
        experts = get_module(model, block.experts)
        widths = backbone.hidden_size, expert_width(experts, backbone.hidden_size)
        return Insertion(block.experts, ExpertScale.for_experts(experts, block.experts, *widths))
    layer = _linear(model, block.ffn_out)
    return Insertion(block.ffn_out, ScaleInput(features(layer)[0]))
