"""What a method's `apply` gets (`ApplyContext`) and hands back (`MethodResult`)."""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import nn

from adaptlab.backbone.parts import Backbone
from adaptlab.methods.config import require
from adaptlab.methods.params import parameters_under
from adaptlab.methods.site import Insertion


@dataclass
class ApplyContext:
    """Shared by the methods of one adapter: the seed for the inserted modules' inits, and
    whether the adapter trains copies of the pretrained weights (`keep_initial`) or the model's
    own tensors (a method that needs the pretrained values while training, mixout, must then
    keep its own copy)."""

    seed: int
    keep_initial: bool = True
    base: Callable[[str], torch.Tensor] | None = None
    """The pretrained value of a base parameter, when adapters may have theirs in place."""

    def linear(self, in_features: int, out_features: int, module_name: str) -> nn.Linear:
        """A linear layer initialised as nn.Linear initialises itself, from the seeded generator
        of `module_name`."""
        layer = nn.Linear(in_features, out_features)
        generator = self.generator(module_name)
        bound = 1 / in_features**0.5
        with torch.no_grad():
            layer.weight.uniform_(-bound, bound, generator=generator)
            layer.bias.uniform_(-bound, bound, generator=generator)
        return layer

    def pretrained(self, model: nn.Module, name: str) -> torch.Tensor:
        """The pretrained value of parameter `name` of `model` (not another adapter's)."""
        return self.base(name) if self.base is not None else model.get_parameter(name)

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
    `no_dropout`: modules (model-absolute names, "" for the whole model) that run without
    dropout while the adapter runs (mixout replaces dropout, Lee et al. 2020).
    """

    groups: dict[str, set[str]] = field(default_factory=dict)
    insertions: list[Insertion] = field(default_factory=list)
    no_dropout: set[str] = field(default_factory=set)

    @staticmethod
    def outside_head(
        method: str, group: str, names: set[str], model: nn.Module, backbone: Backbone, kind: str
    ) -> MethodResult:
        """`names` outside the task head, trained as `group`; refused when none are left
        (`kind` names what the model then lacks)."""
        kept = names - parameters_under(model, backbone.head)
        require(bool(kept), method, f"{backbone.model_class} has no {kind}")
        return MethodResult(groups={group: kept})
