"""Prefix tuning: l learned key and value vectors prepended to every attention.

Li & Liang 2021 ("Prefix-Tuning: Optimizing Continuous Prompts for Generation", §4.2-4.3);
He et al. 2022 ("Towards a Unified View of Parameter-Efficient Transfer Learning", §2.2,
eq. 3): head_i = Attn(x W_q, concat(P_k, C W_k), concat(P_v, C W_v)) with P_k, P_v in R^{l x d}
per layer. Training goes through the reparameterisation of Li & Liang §4.3, which they found
stabler: P = MLP(P'), one MLP (d -> hidden -> layers x 2 x d, tanh) over l learned vectors P'
giving every layer's keys and values. Only P is saved (`saved_tensors`): the MLP is folded
away, and a loaded adapter holds the prefixes themselves (`reparameterize=False`).

The prefixes reach attention through transformers' attention interface
(`adaptlab.methods.attention`): tokens keep their positions, the attention mask gains l
attended columns, padding and key-value caches work unchanged; models that compute attention
in their own code (MPNet) are refused with one line.

Not an identity at initialisation, and it cannot be one: every query attends to the prefixes
too, so each head's output becomes (1 - λ) Attn(...) + λ softmax(q P_k^T) P_v (He et al.
eq. 7), λ the attention mass on the prefixes (docs/methods.md gives the measured size).
Defaults: l = 30 (He et al. §4.5's prefix), MLP width 512, learning rate 1e-4.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from adaptlab.backbone.families import LATENT_ATTENTION
from adaptlab.backbone.linear import features
from adaptlab.backbone.parts import Backbone, BlockParts, get_module
from adaptlab.methods.attention import check_attention
from adaptlab.methods.config import require
from adaptlab.methods.configs.prefix import PrefixConfig
from adaptlab.methods.results import ApplyContext, MethodResult
from adaptlab.methods.site import AttentionModule, Insertion


class PrefixEncoder(nn.Module):
    """P = MLP(P'): l learned vectors of the model's width, through d -> hidden -> n x 2 x w."""

    def __init__(self, embedding: torch.Tensor, down: nn.Linear, up: nn.Linear, width: int) -> None:
        super().__init__()
        self.embedding = nn.Parameter(embedding)
        self.down = down
        self.up = up
        self.width = width

    def layer(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Keys and values of layer `index`, each (l, width): its rows of the MLP's output."""
        rows = slice(index * 2 * self.width, (index + 1) * 2 * self.width)
        hidden = torch.tanh(self.down(self.embedding))
        out = F.linear(hidden, self.up.weight[rows], self.up.bias[rows])
        keys, values = out.split(self.width, dim=-1)
        return keys, values


class Prefix(AttentionModule):
    """One attention module's prefix: its own keys and values, or its rows of the encoder."""

    def __init__(
        self,
        length: int,
        width: int,
        generator: torch.Generator,
        encoder: PrefixEncoder | None = None,
        index: int = 0,
    ) -> None:
        super().__init__()
        self.index = index
        self._encoder: PrefixEncoder | None
        object.__setattr__(self, "_encoder", encoder)  # shared by every layer's prefix
        if encoder is None:
            self.keys = nn.Parameter(torch.randn(length, width, generator=generator))
            self.values = nn.Parameter(torch.randn(length, width, generator=generator))
        elif index == 0:
            self.encoder = encoder  # its parameters registered once, at the first layer

    def keys_values(self) -> tuple[torch.Tensor, torch.Tensor]:
        if self._encoder is None:
            return self.keys, self.values
        return self._encoder.layer(self.index)

    def saved_tensors(self) -> dict[str, torch.Tensor]:
        with torch.no_grad():
            keys, values = self.keys_values()
        return {"keys": keys.detach(), "values": values.detach()}


def attention_module(backbone_query: str) -> str:
    """The attention module of a block: the module holding its query projection."""
    return backbone_query.rpartition(".")[0]


def insert_prefixes(
    model: nn.Module, backbone: Backbone, config: PrefixConfig, ctx: ApplyContext, method: str
) -> list[Insertion]:
    """A prefix at every block's attention module (checked to be reachable first)."""
    require(
        backbone.family not in LATENT_ATTENTION,
        method,
        f"{backbone.model_class} has multi-head latent attention: each key joins rows of "
        "kv_b_proj with a rotary part from another layer, so no layer gives the keys a prefix "
        "must match",
    )
    sites = [attention_module(block.query) for block in backbone.blocks]
    for site in sites:
        check_attention(model, get_module(model, site), site, method)
    widths = {_key_width(model, b) for b in backbone.blocks}
    require(len(widths) == 1, method, "the blocks' key projections differ in width")
    (width,) = widths
    encoder = None
    if config.reparameterize:
        name, hidden = f"{sites[0]}.{method}", config.reparam_hidden
        encoder = PrefixEncoder(
            torch.randn(config.length, backbone.hidden_size, generator=ctx.generator(name)),
            ctx.linear(backbone.hidden_size, hidden, f"{name}.down"),
            ctx.linear(hidden, len(sites) * 2 * width, f"{name}.up"),
            width,
        )
    return [
        Insertion(site, Prefix(config.length, width, ctx.generator(site), encoder, index))
        for index, site in enumerate(sites)
    ]


def _key_width(model: nn.Module, block: BlockParts) -> int:
    """The width of a block's keys: its key projection's output (or rows of a fused one)."""
    (part,) = block.parts("key")
    if part.rows is not None:
        return part.rows.size
    return features(get_module(model, part.module))[1]


def apply(
    model: nn.Module, backbone: Backbone, config: PrefixConfig, ctx: ApplyContext
) -> MethodResult:
    return MethodResult(insertions=insert_prefixes(model, backbone, config, ctx, "prefix"))
