"""The parts of a transformer that adaptation methods attach to, as found by discovery."""

from __future__ import annotations

from dataclasses import dataclass

from torch import nn

from adaptlab.backbone.rows import Rows

INSERTED = "adaptlab"
"""Name of the child module, in every site, that holds what adaptlab inserted there."""


def is_inserted(name: str) -> bool:
    """True for the dotted name of a module or parameter inside what adaptlab inserted."""
    return f".{INSERTED}." in f".{name}."


@dataclass(frozen=True)
class Part:
    """What a role addresses in one layer: the whole layer, or `rows` of a fused one.

    `name` is the role, or the part of a fused layer (query, key, value; gate, up)."""

    module: str
    name: str
    rows: Rows | None = None


@dataclass(frozen=True)
class BlockParts:
    """The linear layers and norms of one transformer block, by role; names are model-absolute."""

    index: int
    name: str
    query: str
    key: str
    value: str
    attention_out: str
    ffn_in: tuple[str, ...]  # one for a plain FFN, two (gate, up) for a gated FFN
    ffn_out: str  # its input is the FFN's intermediate activation: the "neurons"
    norms: tuple[str, ...]
    slices: tuple[tuple[str, Part], ...] = ()
    """(role, part) for each role that owns rows of a fused layer (GPT-2's c_attn, Phi-3's
    gate_up_proj); its module is then named once in the role's field."""
    experts: str | None = None
    """For a mixture-of-experts FFN: the module holding the experts' weights as 3-D tensors;
    `ffn_in` and `ffn_out` then name the whole mixture (its input and output are the FFN's)."""

    def role(self, role: str) -> tuple[str, ...]:
        """Module names that play `role` in this block."""
        value = getattr(self, role)
        return value if isinstance(value, tuple) else (value,)

    def parts(self, role: str) -> tuple[Part, ...]:
        """What `role` addresses in this block: whole layers, or slices of a fused one."""
        sliced = tuple(part for r, part in self.slices if r == role)
        return sliced or tuple(Part(module, role) for module in self.role(role))


@dataclass(frozen=True)
class Backbone:
    """Everything adaptation needs to know about a model's layout, without re-implementing it."""

    model_class: str
    family: str  # the config's model_type ("" when the model has no config)
    blocks_name: str
    blocks: tuple[BlockParts, ...]
    embeddings: str  # the module holding the input embeddings (and their norm, if any)
    head: tuple[str, ...]  # task-specific modules: outside the base model, plus a pooler
    norms: tuple[str, ...]  # every LayerNorm / RMSNorm in the base model
    hidden_size: int
    intermediate_size: int

    @property
    def num_blocks(self) -> int:
        return len(self.blocks)

    def modules_with_role(self, role: str) -> list[str]:
        """Names of the modules playing `role` across all blocks, bottom to top."""
        return [name for block in self.blocks for name in block.role(role)]

    def parts_with_role(self, role: str) -> list[Part]:
        """What `role` addresses across all blocks, bottom to top (see `BlockParts.parts`)."""
        return [part for block in self.blocks for part in block.parts(role)]


def get_module(model: nn.Module, name: str) -> nn.Module:
    """The submodule at dotted `name` (the model itself for the empty name)."""
    return model.get_submodule(name) if name else model
