"""What a method's `apply` hands back to `adapt`."""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field

import torch
from torch import nn
from torch.utils.hooks import RemovableHandle

from adaptlab.methods.handle import Switch


@dataclass
class ApplyContext:
    """Shared by the methods of one `adapt` call: the on/off switch and the seed for inits."""

    switch: Switch
    seed: int

    def generator(self, module_name: str) -> torch.Generator:
        """A generator seeded from the adaptation seed and the module name: reproducible inits."""
        seed = self.seed * 1_000_003 + zlib.crc32(module_name.encode())
        return torch.Generator().manual_seed(seed)


@dataclass
class MethodResult:
    """Parameter names to train, by group, and modules the method inserted."""

    groups: dict[str, set[str]] = field(default_factory=dict)
    inserted: dict[str, nn.Module] = field(default_factory=dict)
    hooks: list[RemovableHandle] = field(default_factory=list)
