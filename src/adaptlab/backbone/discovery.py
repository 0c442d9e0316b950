"""Find the blocks, attention output, FFN, norms, embeddings and head of any HF transformer.

Discovery reads module structure and weight shapes, never a model's forward code, so new
architectures work without new code. Linear layers of both orientations count (`nn.Linear`
and GPT-2's `Conv1D`, `adaptlab.backbone.linear`). Per block:

- query / key / value are recognised by their short names (query, q, q_proj, query_proj,
  q_lin, Wq, ...); a family that fuses them into one layer (GPT-2's c_attn, GPT-NeoX's and
  BLOOM's query_key_value, Phi-3's qkv_proj) declares the layer and the rows of each role in
  `adaptlab.backbone.families`, and the roles address those rows (`BlockParts.slices`);
- the FFN output projection is the linear layer whose input is the widest (the intermediate
  size) and whose output is the hidden size; its input is the FFN's intermediate activation;
- the FFN input projections map the hidden size to the intermediate size (two for gated FFNs,
  or the two halves of a fused gate-up layer the family declares);
- a mixture of experts holding its experts as 3-D tensors (Mixtral, Qwen-MoE, OLMoE) is the
  FFN as a whole: its input and output are the FFN's (`BlockParts.experts`);
- the attention output is the remaining linear layer beside the query projection that maps
  back to the hidden size, else the remaining hidden-to-hidden linear layer of the block.

A block holding two attentions (a decoder block of an encoder-decoder, or of BART's causal LM)
keeps the first registered, its own; the cross-attention's projections are left out.
An encoder-decoder (T5, BART) has two stacks of blocks: the encoder's, then the decoder's,
read as one list in the order they run.

When a part cannot be found the error names the model class, the modules seen, and the
override to pass (``adapt(..., backbone={"ffn_out": "mlp.down_proj"})``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch import nn

from adaptlab.backbone.ends import find_embeddings, find_head
from adaptlab.backbone.families import FUSED, GATE_UP, QKV, Fused
from adaptlab.backbone.linear import features, is_linear
from adaptlab.backbone.overrides import BackboneOverrides
from adaptlab.backbone.parts import Backbone, BlockParts, Part, get_module, is_inserted
from adaptlab.backbone.rows import Rows
from adaptlab.errors import BackboneError

_SHORT_NAMES = {
    "query": {"query", "q", "q_proj", "q_lin", "query_proj", "wq", "q_b_proj"},
    "key": {"key", "k", "k_proj", "k_lin", "key_proj", "wk"},
    "value": {"value", "v", "v_proj", "v_lin", "value_proj", "wv"},
}


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
    config = _text_config(model)
    family = str(getattr(config, "model_type", ""))
    fused = FUSED.get(family, ())
    blocks = tuple(
        _BlockReader(model_class, name, block, overrides, fused, config).read(i)
        for i, (name, block) in enumerate(listed)
    )
    hidden, intermediate = _widths(model, blocks[0])
    return Backbone(
        model_class=model_class,
        family=family,
        blocks_name=blocks_name,
        blocks=blocks,
        embeddings=find_embeddings(model, base_name, model_class, lists),
        head=find_head(model, base_name),
        norms=tuple(
            name
            for name, module in get_module(model, base_name).named_modules(prefix=base_name)
            if is_norm(module)
            and not is_inserted(name)
            and any(True for _ in module.parameters(recurse=False))
        ),
        hidden_size=hidden,
        intermediate_size=intermediate,
    )


def _text_config(model: nn.Module) -> Any:
    """The config of the model's language part (the model's own for a text model)."""
    config = getattr(model, "config", None)
    get_text_config = getattr(config, "get_text_config", None)
    return get_text_config() if callable(get_text_config) else config


def _widths(model: nn.Module, block: BlockParts) -> tuple[int, int]:
    """(hidden size, FFN intermediate size) of a block."""
    hidden = features(get_module(model, block.attention_out))[1]
    if block.experts is None:
        return hidden, features(get_module(model, block.ffn_out))[0]
    return hidden, expert_width(get_module(model, block.experts), hidden)


def expert_width(experts: nn.Module, hidden: int) -> int:
    """The intermediate width of each expert of a mixture (its 3-D weights' narrowest
    dimension other than the `hidden` size)."""
    shapes = [p.shape[1:] for p in experts.parameters(recurse=False) if p.dim() == 3]
    return min(d for shape in shapes for d in shape if d != hidden)


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
        if not any(is_linear(m) for m in module[0].modules()):
            continue
        candidates.append((sum(p.numel() for p in module.parameters()), name))
    if not candidates:
        lists = [n for n, m in model.named_modules() if isinstance(m, nn.ModuleList)]
        raise BackboneError(
            f"{model_class}: found no list of transformer blocks (module lists seen: "
            f"{', '.join(lists) or 'none'}); name it with backbone={{'blocks': '<dotted name>'}}"
        )
    return max(candidates)[1]


class _BlockReader:
    """Reads the parts of one block (`read`); names inside it are relative until the end."""

    def __init__(
        self,
        model_class: str,
        name: str,
        block: nn.Module,
        overrides: BackboneOverrides,
        fused: Sequence[Fused],
        config: Any,
    ) -> None:
        self.model_class, self.name, self.block = model_class, name, block
        self.overrides = overrides
        self.experts = _experts(block)
        linears = {n: m for n, m in block.named_modules() if is_linear(m) and not is_inserted(n)}
        if self.experts is not None:
            inside = f"{self.experts[0]}."
            linears = {n: m for n, m in linears.items() if not n.startswith(inside)}
        self.widths = {n: features(m) for n, m in _own_attention(linears).items()}
        self.fused = {
            n: self._fused_parts(n, entry, config)
            for n in self.widths
            for entry in fused
            if n.rsplit(".", 1)[-1] == entry.name
        }
        self.slices: list[tuple[str, Part]] = []

    def read(self, index: int) -> BlockParts:
        query, key, value = self._attention()
        hidden = self._hidden()
        beside = self._beside(query, hidden, {key, value})
        if self.experts is not None:
            ffn_in: tuple[str, ...] = (self.experts[0],)
            ffn_out = self.experts[0]
        else:
            attention = {query, key, value, *(beside if len(beside) == 1 else ())}
            ffn_out = self._ffn_out(hidden, attention)
            ffn_in = self._ffn_in(hidden, self.widths[ffn_out][0], attention)
        attention_out = self._attention_out(hidden, beside, {query, key, value, ffn_out, *ffn_in})
        return BlockParts(
            index=index,
            name=self.name,
            query=self._absolute(query),
            key=self._absolute(key),
            value=self._absolute(value),
            attention_out=self._absolute(attention_out),
            ffn_in=tuple(self._absolute(n) for n in ffn_in),
            ffn_out=self._absolute(ffn_out),
            norms=self._norms(),
            slices=tuple(self.slices),
            experts=None if self.experts is None else self._absolute(self.experts[1]),
        )

    def _attention(self) -> tuple[str, str, str]:
        """query, key, value: layers found by name, the others as parts of the one fused layer
        the family declares for them (GPT-2's c_attn for all three, DeepSeek's kv_b_proj for the
        key and the value)."""
        named = {role: self._by_short_name(role) for role in QKV}
        missing = tuple(role for role in QKV if named[role] is None)
        fused = [n for n, parts in self.fused.items() if set(missing) <= set(parts) <= set(QKV)]
        if missing and (len(fused) != 1 or any(getattr(self.overrides, r) for r in missing)):
            raise self._fail(f"attention {missing[0]} projection", missing[0])
        if missing:
            self._slice(fused[0], missing)
        query, key, value = (named[role] or fused[0] for role in QKV)
        return query, key, value

    def _hidden(self) -> int:
        """The hidden size: the input width most of the block's layers share (not the query's,
        which reads a latent in DeepSeek's attention)."""
        inputs = Counter(i for i, _ in self.widths.values())
        return max(inputs, key=lambda width: (inputs[width], width))

    def _by_short_name(self, role: str) -> str | None:
        explicit = getattr(self.overrides, role)
        if explicit:
            return self._checked(role, explicit)
        found = [n for n in self.widths if n.rsplit(".", 1)[-1].lower() in _SHORT_NAMES[role]]
        return found[0] if len(found) == 1 else None

    def _ffn_out(self, hidden: int, attention: set[str]) -> str:
        """The layer of widest input mapping back to the hidden size (the attention's left out)."""
        if self.overrides.ffn_out:
            return self._checked("ffn_out", self.overrides.ffn_out)
        back = {
            n: i
            for n, (i, o) in self.widths.items()
            if o == hidden and n not in self.fused and n not in attention
        }
        widest = max(back.values(), default=0)
        outs = [n for n, i in back.items() if i == widest > hidden]
        if len(outs) != 1:
            raise self._fail("FFN output projection", "ffn_out")
        return outs[0]

    def _ffn_in(self, hidden: int, inner: int, attention: set[str]) -> tuple[str, ...]:
        """The layers mapping the hidden size to the intermediate size, or a fused gate-up
        (the attention's left out)."""
        if self.overrides.ffn_in:
            return tuple(self._checked("ffn_in", n) for n in self.overrides.ffn_in)
        plain = tuple(
            n
            for n, w in self.widths.items()
            if w == (hidden, inner) and n not in self.fused and n not in attention
        )
        if plain:
            return plain
        fused = [
            n
            for n, parts in self.fused.items()
            if tuple(parts) == GATE_UP and all(rows.size == inner for rows in parts.values())
        ]
        if len(fused) != 1:
            raise self._fail("FFN input projection", "ffn_in")
        self._slice(fused[0], GATE_UP, role="ffn_in")
        return (fused[0],)

    def _beside(self, query: str, hidden: int, taken: set[str]) -> list[str]:
        """Layers beside the query projection (in its module) that map to the hidden size."""
        scope = query.rpartition(".")[0]
        return [
            n
            for n, (_, o) in self.widths.items()
            if n not in taken | {query} and n.rpartition(".")[0] == scope and o == hidden
        ]

    def _attention_out(self, hidden: int, beside: list[str], taken: set[str]) -> str:
        """The one layer beside the query projection that maps back to the hidden size, else
        the block's one remaining hidden-to-hidden layer."""
        if self.overrides.attention_out:
            return self._checked("attention_out", self.overrides.attention_out)
        if len(beside) == 1:
            return beside[0]
        outs = [
            n
            for n, w in self.widths.items()
            if n not in taken and n not in beside and w == (hidden, hidden)
        ]
        if len(outs) != 1:
            raise self._fail("attention output projection", "attention_out")
        return outs[0]

    def _fused_parts(self, layer: str, entry: Fused, config: Any) -> dict[str, Rows]:
        """The family's rows of each part of `layer`, checked to tile its output exactly."""
        width = self.widths[layer][1]
        parts = entry.parts(config, width)
        rows = torch.cat([r.indices() for r in parts.values()]).sort().values
        if rows.numel() != width or not torch.equal(rows, torch.arange(width)):
            raise BackboneError(
                f"{self.model_class}: the fused layer {self.name}.{layer} ({width} outputs) does "
                f"not split into {', '.join(parts)} as its family's layout says; name whole "
                "layers with backbone={...} instead"
            )
        return parts

    def _slice(self, layer: str, names: tuple[str, ...], role: str | None = None) -> None:
        """Record that `names` (each its own role, or parts of `role`) own rows of `layer`."""
        parts = self.fused[layer]
        self.slices += [
            (role or name, Part(self._absolute(layer), name, parts[name])) for name in names
        ]

    def _norms(self) -> tuple[str, ...]:
        return tuple(
            self._absolute(n)
            for n, m in self.block.named_modules()
            if is_norm(m) and not is_inserted(n)
        )

    def _checked(self, role: str, rel: str) -> str:
        if rel not in self.widths:
            raise self._fail(f"{role} {rel!r} (not a linear layer of the block)", role)
        return rel

    def _fail(self, part: str, override: str) -> BackboneError:
        seen = ", ".join(f"{n} ({i}->{o})" for n, (i, o) in self.widths.items())
        return BackboneError(
            f"{self.model_class}: cannot find the {part} in block {self.name!r} (linear layers "
            f"seen: {seen or 'none'}); name it with backbone={{'{override}': '<name inside the "
            "block>'}"
        )

    def _absolute(self, rel: str) -> str:
        return f"{self.name}.{rel}"


def _experts(block: nn.Module) -> tuple[str, str] | None:
    """(the mixture, its experts) for a block whose FFN is a mixture of experts held as 3-D
    tensors; None for a dense FFN."""
    for name, module in block.named_modules():
        if is_inserted(name) or not name:
            continue
        if any(p.dim() == 3 for p in module.parameters(recurse=False)):
            parent = name.rpartition(".")[0]
            return (parent or name), name
    return None


def _own_attention(linears: dict[str, nn.Module]) -> dict[str, nn.Module]:
    """A block's linear layers without its cross-attention's: when query projections sit in
    two modules, the second registered (a decoder block's attention over the encoder) is left
    out."""
    scopes = [
        n.rpartition(".")[0]
        for n in linears
        if n.rsplit(".", 1)[-1].lower() in _SHORT_NAMES["query"]
    ]
    if len(scopes) != 2 or not all(scopes) or scopes[0] == scopes[1]:
        return linears
    cross = f"{scopes[1]}."
    return {n: m for n, m in linears.items() if not n.startswith(cross)}
