"""LoRA: a low-rank update W + (alpha / r) B A of chosen linear layers (Hu et al. 2022).

Defaults follow Hu et al. §4-5: rank 8, alpha 8, the query and value projections; A starts
Kaiming-uniform and B at zero, so the model is unchanged at initialisation. `merge` folds
B A into W for inference and `unmerge` takes it out again (LoRA declares itself mergeable).

`dora=True` is DoRA (Liu et al. 2024, "DoRA: Weight-Decomposed Low-Rank Adaptation", §4.1,
eq. 5): W' = m ⊙ (W + s B A) / ||W + s B A||, the norm taken per output (each row of the
weight), with a learned magnitude m per output starting at ||W|| (so W' = W at
initialisation). As §4.3 proposes, the norm is treated as a constant in the backward pass,
which saves training memory. The layer's output h = W x + b is reused rather than recomputed:
y = h + (f - 1) ⊙ (h - b) + f ⊙ s B A x with f = m / ||W + s B A||, one autograd function
(`adaptlab.methods.dora`) that keeps a single activation for the backward pass.
Merging writes f ⊙ (W + s B A) into W and keeps the norm it used, so unmerging restores W.
On a quantised layer (QLoRA's base, `adaptlab.models.quantize`) W is the de-quantised weight,
the one the layer multiplies by; merging there is refused (`adaptlab.methods.merging`).
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

from adaptlab.backbone.parts import Backbone, get_module
from adaptlab.errors import ConfigError
from adaptlab.methods.config import require
from adaptlab.methods.configs.lora import LoRAConfig
from adaptlab.methods.dora import DoRAOutput
from adaptlab.methods.results import ApplyContext, MethodResult
from adaptlab.methods.site import Insertion, SiteModule
from adaptlab.models.quantize import dense_weight


class LoRA(SiteModule):
    """The low-rank pair (A, B) of one linear layer: delta(x) = (alpha / r) B A x; with DoRA
    also the magnitude m of each output."""

    mergeable = True

    def __init__(self, layer: nn.Linear, config: LoRAConfig, generator: torch.Generator) -> None:
        super().__init__()
        self.A = nn.Parameter(torch.empty(config.rank, layer.in_features))
        self.B = nn.Parameter(torch.zeros(layer.out_features, config.rank))
        nn.init.kaiming_uniform_(self.A, a=math.sqrt(5), generator=generator)
        self.dropout = nn.Dropout(config.dropout) if config.dropout > 0 else nn.Identity()
        self.scaling = config.alpha / config.rank
        self.magnitude: nn.Parameter | None = None
        if config.dora:
            weight = dense_weight(layer).detach()
            self.magnitude = nn.Parameter(_row_norms(weight).to(torch.float32))
        self._merged_norms: torch.Tensor | None = None

    def weight_delta(self) -> torch.Tensor:
        """The weight update (alpha / r) B A."""
        return (self.B @ self.A) * self.scaling

    def delta(self, x: torch.Tensor) -> torch.Tensor:
        return self._low_rank(self.dropout(x)) * self.scaling

    def output(self, h: torch.Tensor, x: torch.Tensor, site: nn.Module) -> torch.Tensor:
        if self.magnitude is None:
            return h + self.delta(x)
        assert isinstance(site, nn.Linear)
        with torch.no_grad():  # DoRA §4.3: the norm is a constant
            weight = dense_weight(site)
            norms = self._norms(weight)
        if self.training and isinstance(self.dropout, nn.Dropout):
            dropped = self.dropout(x)  # the dropped input also goes through W, as in y' = W' x'
            base = F.linear(dropped, weight.to(dropped.dtype))
        else:
            dropped, base = x, h if site.bias is None else h - site.bias
        update = self._low_rank(dropped)
        return DoRAOutput.apply(h, base, update, self.magnitude, norms, self.scaling)  # type: ignore[no-any-return]

    def _low_rank(self, x: torch.Tensor) -> torch.Tensor:
        """B A x, unscaled."""
        return F.linear(F.linear(x, self.A), self.B)

    def _norms(self, weight: torch.Tensor) -> torch.Tensor:
        """||W + s B A|| per output."""
        return _row_norms(weight + self.weight_delta().to(weight.dtype))

    @torch.no_grad()
    def merge_into(self, layer: nn.Module) -> None:
        """Fold the update into `layer`'s weight; the dispatcher then skips this module."""
        assert isinstance(layer, nn.Linear)
        if self.magnitude is None:
            layer.weight += self.weight_delta().to(layer.weight.dtype)
            return
        norms = self._norms(layer.weight)
        self._merged_norms = norms
        factor = (self.magnitude / norms).to(layer.weight.dtype)[:, None]
        layer.weight.copy_(factor * (layer.weight + self.weight_delta().to(layer.weight.dtype)))

    @torch.no_grad()
    def unmerge_from(self, layer: nn.Module) -> None:
        """Take the update back out of `layer`'s weight."""
        assert isinstance(layer, nn.Linear)
        if self.magnitude is None:
            layer.weight -= self.weight_delta().to(layer.weight.dtype)
            return
        assert self._merged_norms is not None
        factor = (self.magnitude / self._merged_norms).to(layer.weight.dtype)[:, None]
        layer.weight.copy_(layer.weight / factor - self.weight_delta().to(layer.weight.dtype))
        self._merged_norms = None


def _row_norms(weight: torch.Tensor) -> torch.Tensor:
    """The L2 norm of each row of a linear layer's weight: one per output."""
    return torch.linalg.vector_norm(weight, dim=1)


def apply(
    model: nn.Module, backbone: Backbone, config: LoRAConfig, ctx: ApplyContext
) -> MethodResult:
    result = MethodResult()
    for target in (name for role in config.targets for name in backbone.modules_with_role(role)):
        layer = get_module(model, target)
        if not isinstance(layer, nn.Linear):
            raise ConfigError(f"lora: {target!r} is a {type(layer).__name__}, not a linear layer")
        require(
            config.rank <= min(layer.in_features, layer.out_features),
            "lora",
            f"rank {config.rank} exceeds the full rank {min(layer.in_features, layer.out_features)}"
            f" of {target!r}",
        )
        lora = LoRA(layer, config, ctx.generator(target))
        result.insertions.append(Insertion(target, lora, reads=target))
    return result
