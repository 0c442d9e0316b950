"""What discovery cannot read from module names and shapes alone, per model family, in one table.

Most families need nothing here. Some compute several projections in one fused linear layer,
and which of its output rows belong to the query, the key and the value (or to the gate and
the up projection of a gated FFN) is written only in the family's forward code. `FUSED` maps
a `config.model_type` to its fused layers: the layer's name inside the block and a function of
the config and the layer's output width giving each part's rows. A family's entry is checked
against the layer it finds (the rows must tile the output exactly), so a new variant of a
family fails loudly rather than slicing wrongly.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from adaptlab.backbone.rows import Rows

Layout = Callable[[Any, int], dict[str, Rows]]
"""(config, output width) -> part name -> its rows."""

QKV = ("query", "key", "value")
"""The attention roles a fused layer may hold (all three, or the key and the value)."""
GATE_UP = ("gate", "up")


@dataclass(frozen=True)
class Fused:
    """A fused linear layer of a family: its last name in the block and its parts' rows."""

    name: str
    layout: Layout

    def parts(self, config: Any, width: int) -> dict[str, Rows]:
        """Each part's rows of a layer `width` outputs wide."""
        return self.layout(config, width)


def _heads(config: Any) -> tuple[int, int]:
    """(attention heads, key-value heads) of `config`."""
    heads = int(config.num_attention_heads)
    kv = getattr(config, "num_key_value_heads", None) or heads
    return heads, int(kv)


def _head_dim(width: int, heads: int, kv: int) -> int:
    """The head width of a fused query-key-value output `width` wide."""
    return width // (heads + 2 * kv)


def _blocks(heads: int, kv: int, width: int) -> dict[str, Rows]:
    """[q | k | v]: each role one block (GPT-2, Phi-3, MPT, ModernBERT)."""
    d = _head_dim(width, heads, kv)
    q, k = heads * d, kv * d
    return {
        "query": Rows.block(0, q),
        "key": Rows.block(q, q + k),
        "value": Rows.block(q + k, q + 2 * k),
    }


def qkv_blocks(config: Any, width: int) -> dict[str, Rows]:
    """[q | k | v] with the config's key-value heads."""
    return _blocks(*_heads(config), width)


def qkv_per_head(config: Any, width: int) -> dict[str, Rows]:
    """(heads, 3, head_dim): each head's q, k, v side by side (GPT-NeoX, BLOOM, Persimmon)."""
    heads = int(config.num_attention_heads)
    d = _head_dim(width, heads, heads)
    return {role: Rows(i * d, d, 3 * d, heads) for i, role in enumerate(QKV)}


def _qkv_per_group(heads: int, kv: int, width: int) -> dict[str, Rows]:
    """(kv heads, heads / kv + 2, head_dim): each group's queries, then its key and value."""
    d, group = _head_dim(width, heads, kv), heads // kv
    stride = (group + 2) * d
    return {
        "query": Rows(0, group * d, stride, kv),
        "key": Rows(group * d, d, stride, kv),
        "value": Rows((group + 1) * d, d, stride, kv),
    }


def falcon_qkv(config: Any, width: int) -> dict[str, Rows]:
    """Falcon's three layouts: grouped (new decoder architecture), one shared key and value
    after the queries (multi-query), or per head."""
    heads = int(config.num_attention_heads)
    if config.new_decoder_architecture:
        return _qkv_per_group(heads, int(config.num_kv_heads), width)
    if config.multi_query:
        return _blocks(heads, 1, width)
    return qkv_per_head(config, width)


def bigcode_qkv(config: Any, width: int) -> dict[str, Rows]:
    """GPT-BigCode (StarCoder): one shared key and value after the queries (multi-query), or
    per head."""
    if config.multi_query:
        return _blocks(int(config.num_attention_heads), 1, width)
    return qkv_per_head(config, width)


def codegen_qkv(config: Any, width: int) -> dict[str, Rows]:
    """CodeGen: four groups (its TPU cores), each [q | v | k] of a quarter of the heads."""
    groups = 4
    local = width // (3 * groups)
    return {
        role: Rows(i * local, local, 3 * local, groups)
        for i, role in enumerate(("query", "value", "key"))
    }


def latent_kv(config: Any, width: int) -> dict[str, Rows]:
    """Multi-head latent attention (DeepSeek-V2/V3, MiniCPM3): kv_b_proj gives each head's key
    (its part without rotary embedding) then its value."""
    key, value = int(config.qk_nope_head_dim), int(config.v_head_dim)
    heads = width // (key + value)
    return {
        "key": Rows(0, key, key + value, heads),
        "value": Rows(key, value, key + value, heads),
    }


def gate_up_halves(config: Any, width: int) -> dict[str, Rows]:
    """[gate | up]: the activated half first (Phi-3, GLM, ModernBERT's Wi)."""
    half = width // 2
    return {"gate": Rows.block(0, half), "up": Rows.block(half, width)}


_PHI3 = (Fused("qkv_proj", qkv_blocks), Fused("gate_up_proj", gate_up_halves))
_LATENT = (Fused("kv_b_proj", latent_kv),)
LATENT_ATTENTION = (
    "deepseek_v2", "deepseek_v3", "deepseek_v32", "minicpm3", "glm4_moe_lite", "glm_moe_dsa",
    "mistral4", "youtu",
)  # fmt: skip
"""Families with multi-head latent attention: a key joins kv_b_proj's rows with a rotary part
from another layer, so no layer's output is the whole key."""

FUSED: Mapping[str, tuple[Fused, ...]] = {
    "gpt2": (Fused("c_attn", qkv_blocks),),
    "openai-gpt": (Fused("c_attn", qkv_blocks),),
    "gpt_bigcode": (Fused("c_attn", bigcode_qkv),),
    "gpt_neox": (Fused("query_key_value", qkv_per_head),),
    "gpt_neox_japanese": (Fused("query_key_value", qkv_per_head),),
    "bloom": (Fused("query_key_value", qkv_per_head),),
    "persimmon": (Fused("query_key_value", qkv_per_head),),
    "falcon": (Fused("query_key_value", falcon_qkv),),
    "mpt": (Fused("Wqkv", qkv_blocks),),
    "codegen": (Fused("qkv_proj", codegen_qkv),),
    "deberta": (Fused("in_proj", qkv_per_head),),
    "modernbert": (Fused("Wqkv", qkv_blocks), Fused("Wi", gate_up_halves)),
    "modernbert-decoder": (Fused("Wi", gate_up_halves),),
    "phi3": _PHI3,
    "phi4_multimodal": _PHI3,
    "glm": (Fused("gate_up_proj", gate_up_halves),),
    "glm4": (Fused("gate_up_proj", gate_up_halves),),
    **{family: _LATENT for family in LATENT_ATTENTION},
}
"""model_type -> its fused linear layers."""
