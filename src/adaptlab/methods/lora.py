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

A target that is part of a fused layer (the query rows of GPT-2's c_attn, the gate half of
Phi-3's gate_up_proj) gets a pair of its own whose update B A covers only its rows: a block of
the fused weight, exactly what LoRA on a separate projection would be (`adaptlab.methods.sliced`
holds a fused layer's pairs). GPT-2's Conv1D layers, stored in x out, are read and merged
through the same (out, in) view (`adaptlab.methods.layer_weight`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import nn
from torch.nn import functional as F

from adaptlab.backbone.linear import features, is_linear
from adaptlab.backbone.parts import Backbone, Part, get_module
from adaptlab.backbone.rows import Rows
from adaptlab.errors import ConfigError
from adaptlab.methods.config import require
from adaptlab.methods.configs.lora import LoRAConfig
from adaptlab.methods.dora import DoRAOutput
from adaptlab.methods.layer_weight import weight_matrix
from adaptlab.methods.results import ApplyContext, MethodResult
from adaptlab.methods.rowwise import RowWise
from adaptlab.methods.sliced import insert_parts


class LoRA(RowWise):
    """The low-rank pair (A, B) of one linear layer (or of `rows` of a fused one):
    delta(x) = (alpha / r) B A x; with DoRA also the magnitude m of each output."""

    mergeable = True

    def __init__(
        self,
        layer: nn.Module,
        config: LoRAConfig,
        generator: torch.Generator,
        rows: Rows | None = None,
    ) -> None:
        in_features, out_features = features(layer)
        super().__init__(rows)
        width = rows.size if rows is not None else out_features
        self.A = nn.Parameter(torch.empty(config.rank, in_features))
        self.B = nn.Parameter(torch.zeros(width, config.rank))
        nn.init.kaiming_uniform_(self.A, a=math.sqrt(5), generator=generator)
        self.dropout = nn.Dropout(config.dropout) if config.dropout > 0 else nn.Identity()
        self.scaling = config.alpha / config.rank
        self.magnitude: nn.Parameter | None = None
        if config.dora:
            weight = self.own_rows(weight_matrix(layer).detach())
            self.magnitude = nn.Parameter(_row_norms(weight).to(torch.float32))
        self._merged_norms: torch.Tensor | None = None

    @classmethod
    def joint_output(
        cls, parts: Sequence[RowWise], h: torch.Tensor, x: torch.Tensor
    ) -> torch.Tensor | None:
        """The plain pairs of a fused layer's parts as one product: h + s B' (A' x), A' the
        parts' A stacked and B' zero but for each part's B in its rows and its own r columns
        (the same sum as the pairs one after another, in one pass over h, as PEFT's one pair on
        the whole layer costs). The input is dropped once for all parts. None with DoRA."""
        pairs = [p for p in parts if isinstance(p, LoRA) and p.magnitude is None]
        if len(pairs) != len(parts) or any(p.row_index is None for p in pairs):
            return None
        a, b = cls.joint_pair(pairs, h.shape[-1])
        return h + F.linear(F.linear(pairs[0].dropout(x), a), b) * pairs[0].scaling

    @staticmethod
    def joint_pair(pairs: Sequence[LoRA], width: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The pairs of a fused layer's parts (of `width` outputs) as one pair of rank k r:
        (A', B') with B' A' the parts' updates side by side (the scaling is the parts')."""
        a = torch.cat([p.A for p in pairs])
        rows = torch.cat([p.row_index for p in pairs if p.row_index is not None])
        b = a.new_zeros(width, a.shape[0])
        return a, b.index_copy(0, rows, torch.block_diag(*(p.B for p in pairs)))

    def weight_delta(self) -> torch.Tensor:
        """The update (alpha / r) B A of this pair's rows."""
        return (self.B @ self.A) * self.scaling

    def delta(self, x: torch.Tensor) -> torch.Tensor:
        return self._low_rank(self.dropout(x)) * self.scaling

    def output(self, h: torch.Tensor, x: torch.Tensor, site: nn.Module) -> torch.Tensor:
        if self.magnitude is None:
            return self.add_rows(h, self.delta(x))
        with torch.no_grad():  # DoRA §4.3: the norm is a constant
            weight = self.own_rows(weight_matrix(site))
            norms = self._norms(weight)
        bias = getattr(site, "bias", None)
        h_rows = self.own_rows(h, dim=-1)
        if self.training and isinstance(self.dropout, nn.Dropout):
            dropped = self.dropout(x)  # the dropped input also goes through W, as in y' = W' x'
            base = F.linear(dropped, weight.to(dropped.dtype))
        else:
            dropped = x
            base = h_rows if bias is None else h_rows - self.own_rows(bias)
        update = self._low_rank(dropped)
        rows = DoRAOutput.apply(h_rows, base, update, self.magnitude, norms, self.scaling)
        return self.put_rows(h, rows)

    def _low_rank(self, x: torch.Tensor) -> torch.Tensor:
        """B A x, unscaled."""
        return F.linear(F.linear(x, self.A), self.B)

    def _norms(self, weight: torch.Tensor) -> torch.Tensor:
        """||W + s B A|| per output (of this pair's rows)."""
        return _row_norms(weight + self.weight_delta().to(weight.dtype))

    @torch.no_grad()
    def merge_into(self, layer: nn.Module) -> None:
        """Fold the update into `layer`'s weight; the dispatcher then skips this module."""
        weight = weight_matrix(layer)
        if self.magnitude is None:
            self.add_rows_(weight, self.weight_delta().to(weight.dtype))
            return
        own = self.own_rows(weight)
        norms = self._norms(own)
        self._merged_norms = norms
        factor = (self.magnitude / norms).to(weight.dtype)[:, None]
        self.put_rows_(weight, factor * (own + self.weight_delta().to(weight.dtype)))

    @torch.no_grad()
    def unmerge_from(self, layer: nn.Module) -> None:
        """Take the update back out of `layer`'s weight."""
        weight = weight_matrix(layer)
        if self.magnitude is None:
            self.add_rows_(weight, -self.weight_delta().to(weight.dtype))
            return
        assert self._merged_norms is not None
        factor = (self.magnitude / self._merged_norms).to(weight.dtype)[:, None]
        own = self.own_rows(weight)
        self.put_rows_(weight, own / factor - self.weight_delta().to(weight.dtype))
        self._merged_norms = None


def _row_norms(weight: torch.Tensor) -> torch.Tensor:
    """The L2 norm of each row of a linear layer's weight: one per output."""
    return torch.linalg.vector_norm(weight, dim=1)


def apply(
    model: nn.Module, backbone: Backbone, config: LoRAConfig, ctx: ApplyContext
) -> MethodResult:
    def pair(part: Part) -> LoRA:
        layer = get_module(model, part.module)
        if not is_linear(layer):
            raise ConfigError(
                f"lora: {part.module!r} ({part.name}) is a {type(layer).__name__}, not a linear "
                "layer"
            )
        in_features, out_features = features(layer)
        out = part.rows.size if part.rows is not None else out_features
        require(
            config.rank <= min(in_features, out),
            "lora",
            f"rank {config.rank} exceeds the full rank {min(in_features, out)} of "
            f"{part.module!r}" + (f" ({part.name})" if part.rows is not None else ""),
        )
        name = part.module if part.rows is None else f"{part.module}.{part.name}"
        return LoRA(layer, config, ctx.generator(name), part.rows)

    parts = [part for role in config.targets for part in backbone.parts_with_role(role)]
    return MethodResult(insertions=insert_parts(parts, pair, reads_site=True))
