"""Find the blocks, attention output, FFN, norms, embeddings and head of any HF transformer.

Discovery reads module structure and weight shapes, never a model's forward code, so new
architectures work without new code. Per block:

- the FFN output projection is the linear layer whose input is the widest (the intermediate
  size) and whose output is the hidden size; its input is the FFN's intermediate activation;
- the FFN input projections map the hidden size to the intermediate size (two for gated FFNs);
- query / key / value are recognised by their short names (query, q, q_proj, q_lin, ...);
- the attention output is the remaining hidden-to-hidden linear layer.

An encoder-decoder (T5, BART) has two stacks of blocks: the encoder's, then the decoder's, read
as one list in the order they run. A decoder block holds two attentions, its own and the
cross-attention over the encoder's output, registered in that order; its roles are those of
its own attention (the cross-attention's projections are left out).

When a part cannot be found the error names the model class, the modules seen, and the
override to pass (``adapt(..., backbone={"ffn_out": "mlp.down_proj"})``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from torch import nn

from adaptlab.backbone.overrides import BackboneOverrides
from adaptlab.backbone.parts import Backbone, BlockParts, get_module, is_inserted
from adaptlab.errors import BackboneError

_SHORT_NAMES = {
    "query": {"query", "q", "q_proj", "q_lin"},
    "key": {"key", "k", "k_proj", "k_lin"},
    "value": {"value", "v", "v_proj", "v_lin"},
}
_POOLER_NAMES = {"pooler"}


def is_norm(module: nn.Module) -> bool:
    """LayerNorm, RMSNorm and their per-architecture subclasses."""
    return isinstance(module, nn.LayerNorm | nn.RMSNorm) or type(module).__name__.endswith("Norm")


def find_backbone(
    model: nn.Module, overrides: BackboneOverrides | Mapping[str, Any] | None = None
) -> Backbone:
    """Read `model`'s layout; `overrides` names the modules discovery cannot find."""
    overrides = BackboneOverrides.parse(overrides)
    model_class = type(model).__name__
    base_name = _base_model_name(model)
    stacks = _stacks(model, base_name)
    if overrides.blocks:
        lists = [overrides.blocks]
    else:
        lists = [_find_blocks(model, stack, model_class) for stack in stacks]
    blocks_name = lists[0]
    listed: list[tuple[str, nn.Module]] = []
    for name in lists:
        block_list = get_module(model, name)
        if not isinstance(block_list, nn.ModuleList) or len(block_list) == 0:
            raise BackboneError(
                f"{model_class}: {name!r} is not a non-empty ModuleList of transformer blocks"
            )
        listed += [(f"{name}.{i}", block) for i, block in enumerate(block_list)]
    blocks = tuple(
        _read_block(model_class, name, i, block, overrides, two_attentions=len(stacks) > 1)
        for i, (name, block) in enumerate(listed)
    )
    first = get_module(model, blocks[0].ffn_out)
    assert isinstance(first, nn.Linear)
    return Backbone(
        model_class=model_class,
        blocks_name=blocks_name,
        blocks=blocks,
        embeddings=_find_embeddings(model, base_name, model_class),
        head=_find_head(model, base_name),
        norms=tuple(
            name
            for name, module in get_module(model, base_name).named_modules(prefix=base_name)
            if is_norm(module)
            and not is_inserted(name)
            and any(True for _ in module.parameters(recurse=False))
        ),
        hidden_size=first.out_features,
        intermediate_size=first.in_features,
    )


def _base_model_name(model: nn.Module) -> str:
    prefix = getattr(model, "base_model_prefix", "")
    return prefix if prefix and isinstance(getattr(model, prefix, None), nn.Module) else ""


def _stacks(model: nn.Module, base_name: str) -> tuple[str, ...]:
    """Where the blocks are searched: an encoder-decoder's encoder and decoder, else the base
    model."""
    if not getattr(getattr(model, "config", None), "is_encoder_decoder", False):
        return (base_name,)
    names = {id(module): name for name, module in model.named_modules()}
    getters = (getattr(model, "get_encoder", None), getattr(model, "get_decoder", None))
    found = tuple(names.get(id(get()), "") for get in getters if callable(get))
    return found if len(found) == 2 and all(found) else (base_name,)


def _find_blocks(model: nn.Module, base_name: str, model_class: str) -> str:
    """The ModuleList of identical blocks holding the most parameters (under `base_name`)."""
    base = get_module(model, base_name)
    candidates = []
    for name, module in base.named_modules(prefix=base_name):
        if not isinstance(module, nn.ModuleList) or len(module) == 0:
            continue
        if len({type(child) for child in module}) != 1:
            continue
        if not any(isinstance(m, nn.Linear) for m in module[0].modules()):
            continue
        candidates.append((sum(p.numel() for p in module.parameters()), name))
    if not candidates:
        lists = [n for n, m in model.named_modules() if isinstance(m, nn.ModuleList)]
        raise BackboneError(
            f"{model_class}: found no list of transformer blocks (module lists seen: "
            f"{', '.join(lists) or 'none'}); name it with backbone={{'blocks': '<dotted name>'}}"
        )
    return max(candidates)[1]


def _read_block(
    model_class: str,
    name: str,
    index: int,
    block: nn.Module,
    overrides: BackboneOverrides,
    two_attentions: bool = False,
) -> BlockParts:
    linears = {
        n: m for n, m in block.named_modules() if isinstance(m, nn.Linear) and not is_inserted(n)
    }
    if two_attentions:
        linears = _own_attention(linears)

    def fail(part: str, override: str) -> BackboneError:
        seen = ", ".join(f"{n} ({m.in_features}->{m.out_features})" for n, m in linears.items())
        return BackboneError(
            f"{model_class}: cannot find the {part} in block {name!r} (linear layers seen: "
            f"{seen or 'none'}); name it with backbone={{'{override}': '<name inside the block>'}}"
        )

    def checked(role: str, rel: str) -> str:
        if rel not in linears:
            raise fail(f"{role} {rel!r} (not a linear layer of the block)", role)
        return rel

    if overrides.ffn_out:
        ffn_out = checked("ffn_out", overrides.ffn_out)
    else:
        widest = max((m.in_features for m in linears.values()), default=0)
        outs = [n for n, m in linears.items() if m.in_features == widest > m.out_features]
        if len(outs) != 1:
            raise fail("FFN output projection", "ffn_out")
        ffn_out = outs[0]
    hidden, inner = linears[ffn_out].out_features, linears[ffn_out].in_features

    if overrides.ffn_in:
        ffn_in = tuple(checked("ffn_in", n) for n in overrides.ffn_in)
    else:
        ffn_in = tuple(
            n for n, m in linears.items() if m.in_features == hidden and m.out_features == inner
        )
        if not ffn_in:
            raise fail("FFN input projection", "ffn_in")

    def by_short_name(role: str) -> str:
        explicit = getattr(overrides, role)
        if explicit:
            return checked(role, explicit)
        found = [n for n in linears if n.rsplit(".", 1)[-1] in _SHORT_NAMES[role]]
        if len(found) != 1:
            raise fail(f"attention {role} projection", role)
        return found[0]

    query, key, value = by_short_name("query"), by_short_name("key"), by_short_name("value")
    if overrides.attention_out:
        attention_out = checked("attention_out", overrides.attention_out)
    else:
        taken = {query, key, value, ffn_out, *ffn_in}
        outs = [
            n
            for n, m in linears.items()
            if n not in taken and m.in_features == m.out_features == hidden
        ]
        if len(outs) != 1:
            raise fail("attention output projection", "attention_out")
        attention_out = outs[0]

    def absolute(rel: str) -> str:
        return f"{name}.{rel}"

    return BlockParts(
        index=index,
        name=name,
        query=absolute(query),
        key=absolute(key),
        value=absolute(value),
        attention_out=absolute(attention_out),
        ffn_in=tuple(absolute(n) for n in ffn_in),
        ffn_out=absolute(ffn_out),
        norms=tuple(
            absolute(n) for n, m in block.named_modules() if is_norm(m) and not is_inserted(n)
        ),
    )


def _own_attention(linears: dict[str, nn.Linear]) -> dict[str, nn.Linear]:
    """A block's linear layers without its cross-attention's: when query projections sit in
    two modules, the second registered (a decoder block's attention over the encoder) is left
    out."""
    scopes = [
        n.rpartition(".")[0] for n in linears if n.rsplit(".", 1)[-1] in _SHORT_NAMES["query"]
    ]
    if len(scopes) != 2 or not all(scopes) or scopes[0] == scopes[1]:
        return linears
    cross = f"{scopes[1]}."
    return {n: m for n, m in linears.items() if not n.startswith(cross)}


def _find_embeddings(model: nn.Module, base_name: str, model_class: str) -> str:
    """The module that owns the input token embeddings (BERT's `embeddings`, Llama's table)."""
    get_embeddings = getattr(model, "get_input_embeddings", None)
    table = get_embeddings() if callable(get_embeddings) else None
    name = next((n for n, m in model.named_modules() if m is table), None)
    if name is None:
        raise BackboneError(
            f"{model_class}: get_input_embeddings() gives no module of the model; "
            "the model must expose its input embeddings"
        )
    parent = name.rsplit(".", 1)[0] if "." in name else ""
    return name if parent in ("", base_name) else parent


def _find_head(model: nn.Module, base_name: str) -> tuple[str, ...]:
    """Task modules: the model's children outside the base model, and the base model's pooler.

    The pooler counts as head because it is task-specific (trained for next-sentence
    prediction, absent from many checkpoints) and feeds the classifier directly.
    """
    if not base_name:
        return ()
    outside = [
        name
        for name, child in model.named_children()
        if name != base_name and any(True for _ in child.parameters())
    ]
    base = get_module(model, base_name)
    poolers = [
        f"{base_name}.{name}"
        for name, child in base.named_children()
        if name in _POOLER_NAMES and any(True for _ in child.parameters())
    ]
    return tuple(outside + poolers)
