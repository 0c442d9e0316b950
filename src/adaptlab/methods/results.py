"""What a method's `apply` gets (`ApplyContext`) and hands back (`MethodResult`)."""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field

import torch

from adaptlab.backbone import Backbone
from adaptlab.methods.config import require
from adaptlab.methods.site import Insertion


@dataclass
class ApplyContext:
    """Shared by the methods of one adapter: the seed for the inserted modules' inits."""

    seed: int

    def generator(self, module_name: str) -> torch.Generator:
        """A generator seeded from the adapter's seed and the module name: reproducible inits."""
        seed = self.seed * 1_000_003 + zlib.crc32(module_name.encode())
        return torch.Generator().manual_seed(seed)

    @staticmethod
    def check_bottleneck(method: str, size: int, backbone: Backbone) -> None:
        """A bottleneck wider than the model's own FFN is refused (and never allocated)."""
        require(
            size <= backbone.intermediate_size,
            method,
            f"hidden_size {size} exceeds the FFN width {backbone.intermediate_size} of "
            f"{backbone.model_class}; an adapter is a bottleneck",
        )


@dataclass
class MethodResult:
    """Pretrained parameters the method trains (canonical names, by group) and its insertions.

    The parameters of inserted modules train too; they form a group named after the method.
    """

    groups: dict[str, set[str]] = field(default_factory=dict)
    insertions: list[Insertion] = field(default_factory=list)
