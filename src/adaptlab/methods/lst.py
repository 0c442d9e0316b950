"""Ladder Side-Tuning: a small side network fed by the frozen backbone's layer outputs.

Sung et al. 2022 ("LST: Ladder Side-Tuning for Parameter and Memory Efficient Transfer
Learning", §3.1): a side network of the backbone's depth, r times narrower, takes the
backbone's intermediate activations through ladders, linear down-projections d -> d / r of
every block's output, mixed into the side stream by a learned gate:
s_i = f_i(μ_i down_i(h_i) + (1 - μ_i) s_{i-1}), μ_i = sigmoid(α_i / T), α_i = 0 at the start,
T = 0.1, s_0 = down_0(the first block's input). The side network's last output, normalised and
projected back up to d, replaces the backbone's last block output, which the model's own head
(and Llama's final norm) then reads. Ladders read detached activations, so no gradient flows
through the backbone: its activations need not be kept for a backward pass, which is the
point of the method (training memory; `benchmarks/methods_step.py` measures it).

Here f_i is a pre-LayerNorm transformer layer (self-attention with the backbone's number of
heads, GELU FFN of width FFN / r), causal when the backbone's attention is; it is a new
network of the method's own, randomly initialised (the paper initialises it from the pruned
backbone, §3.2: not done here). The padding mask is read from the model's call. Defaults:
r = 8, T = 0.1, dropout 0.1 in the side layers, learning rate 3e-3 (Sung et al. §4.1).
The backbone runs without dropout (see `adaptlab.methods.frozen`); a forward with a
key-value cache (generation) is refused: the side network keeps none.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from adaptlab.backbone.parts import Backbone, get_module
from adaptlab.errors import ConfigError
from adaptlab.methods.config import require
from adaptlab.methods.configs.lst import LSTConfig
from adaptlab.methods.prefix import attention_module
from adaptlab.methods.results import ApplyContext, MethodResult
from adaptlab.methods.site import Insertion, SiteModule


@dataclass
class SideRun:
    """What one forward pass of the side network carries from block to block."""

    causal: bool
    hidden: torch.Tensor | None = None
    keep: torch.Tensor | None = field(default=None, repr=False)
    """(batch, tokens) True for real tokens, from the model's attention mask."""

    def attention_mask(self, hidden: torch.Tensor) -> torch.Tensor | None:
        """Who attends to whom in the side layers (every token at least to itself)."""
        tokens = hidden.shape[1]
        if self.keep is None and not self.causal:
            return None
        allowed = torch.ones(1, tokens, tokens, dtype=torch.bool, device=hidden.device)
        if self.keep is not None:
            allowed = allowed & self.keep[:, None, :].to(hidden.device)
        if self.causal:
            allowed = allowed & torch.ones_like(allowed[0]).tril()
        allowed = allowed | torch.eye(tokens, dtype=torch.bool, device=hidden.device)
        return allowed[:, None]


class SideLayer(nn.Module):
    """A pre-LayerNorm transformer layer of width w: self-attention, then a GELU FFN."""

    def __init__(
        self, width: int, ffn: int, heads: int, dropout: float, ctx: ApplyContext, name: str
    ) -> None:
        super().__init__()
        self.heads = heads
        self.attention_norm = nn.LayerNorm(width)
        self.qkv = ctx.linear(width, 3 * width, f"{name}.qkv")
        self.out = ctx.linear(width, width, f"{name}.out")
        self.ffn_norm = nn.LayerNorm(width)
        self.ffn_in = ctx.linear(width, ffn, f"{name}.ffn_in")
        self.ffn_out = ctx.linear(ffn, width, f"{name}.ffn_out")
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        batch, tokens, width = x.shape
        q, k, v = (
            t.view(batch, tokens, self.heads, -1).transpose(1, 2)
            for t in self.qkv(self.attention_norm(x)).chunk(3, dim=-1)
        )
        p = self.dropout.p if self.training else 0.0
        attended = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p)
        x = x + self.dropout(self.out(attended.transpose(1, 2).reshape(batch, tokens, width)))
        return x + self.dropout(self.ffn_out(F.gelu(self.ffn_in(self.ffn_norm(x)))))


class Ladder(SiteModule):
    """At block i: the ladder down_i and gate α_i into the side stream, then side layer i.

    The first also starts the side stream from the block's input and reads the padding mask
    from the model's call; the last projects the side stream back up and returns it as the
    block's output. The others leave the block's output as it is.
    """

    sees_model_call = True
    fusable = False

    def __init__(
        self,
        index: int,
        last: bool,
        hidden: int,
        config: LSTConfig,
        shape: tuple[int, int, int],
        run: SideRun,
        ctx: ApplyContext,
        name: str,
    ) -> None:
        super().__init__()
        width, ffn, heads = shape
        self.index, self.last = index, last
        self.changes_output = last
        self.temperature = config.gate_temperature
        object.__setattr__(self, "run", run)
        self.run: SideRun
        if index == 0:
            self.first_down = ctx.linear(hidden, width, f"{name}.first_down")
        self.down = ctx.linear(hidden, width, f"{name}.down")
        self.gate = nn.Parameter(torch.zeros(()))
        self.layer = SideLayer(width, ffn, heads, config.dropout, ctx, f"{name}.layer")
        if last:
            self.final_norm = nn.LayerNorm(width)
            self.up = ctx.linear(width, hidden, f"{name}.up")

    def model_call(self, arguments: Mapping[str, Any]) -> None:
        if self.index != 0:
            return
        if arguments.get("past_key_values") is not None:
            raise ConfigError(
                "lst: the side network keeps no key-value cache; run the model on whole "
                "sequences (use_cache=False when generating)"
            )
        mask = arguments.get("attention_mask")
        if mask is not None and mask.dim() != 2:
            raise ConfigError("lst: the attention mask must be (batch, tokens)")
        self.run.keep = None if mask is None else mask.bool()

    def output(self, h: torch.Tensor, x: torch.Tensor, site: nn.Module) -> torch.Tensor:
        run = self.run
        if self.index == 0:
            run.hidden = self.first_down(x.detach())
        assert run.hidden is not None, "the side network starts at the first block"
        mu = torch.sigmoid(self.gate / self.temperature)
        mixed = mu * self.down(h.detach()) + (1 - mu) * run.hidden
        run.hidden = self.layer(mixed, run.attention_mask(mixed))
        if not self.last:
            return h
        out = self.up(self.final_norm(run.hidden))
        run.hidden = None
        return out.to(h.dtype)


def side_shape(model: nn.Module, backbone: Backbone, config: LSTConfig) -> tuple[int, int, int]:
    """(width, FFN width, heads) of the side layers: the backbone's divided by r, same heads."""
    r = config.reduction_factor
    width, ffn = backbone.hidden_size // r, backbone.intermediate_size // r
    require(width >= 1 and ffn >= 1, "lst", f"reduction_factor {r} leaves no side width")
    heads = int(getattr(getattr(model, "config", None), "num_attention_heads", 1) or 1)
    if width % heads:
        heads = math.gcd(width, heads)
    return width, ffn, heads


def apply(
    model: nn.Module, backbone: Backbone, config: LSTConfig, ctx: ApplyContext
) -> MethodResult:
    stacks = {block.name.rpartition(".")[0] for block in backbone.blocks}
    require(
        len(stacks) == 1,
        "lst",
        f"{backbone.model_class} has an encoder and a decoder; "
        "the side network follows a single stack of blocks",
    )
    shape = side_shape(model, backbone, config)
    first_attention = get_module(model, attention_module(backbone.blocks[0].query))
    run = SideRun(causal=bool(getattr(first_attention, "is_causal", False)))
    last = backbone.num_blocks - 1
    result = MethodResult()
    for block in backbone.blocks:
        ladder = Ladder(
            block.index,
            block.index == last,
            backbone.hidden_size,
            config,
            shape,
            run,
            ctx,
            block.name,
        )
        reads = block.name if block.index == 0 else None
        result.insertions.append(Insertion(block.name, ladder, reads=reads))
    return result
