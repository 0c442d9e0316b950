"""LoRA: a low-rank update W + (alpha / r) B A of chosen linear layers (Hu et al. 2022).

Defaults follow Hu et al. §4-5: rank 8, alpha 8, the query and value projections; A starts
Kaiming-uniform and B at zero, so the model is unchanged at initialisation. `merge` folds
B A into W for inference and `unmerge` takes it out again (LoRA declares itself mergeable).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from adaptlab.backbone import ROLES, Backbone, get_module
from adaptlab.errors import ConfigError
from adaptlab.methods.config import MethodConfig, check_positive_int, require
from adaptlab.methods.registry import Method, register
from adaptlab.methods.results import ApplyContext, MethodResult
from adaptlab.methods.site import Insertion, SiteModule


@dataclass(frozen=True)
class LoRAConfig(MethodConfig):
    """rank r, scaling alpha / r, dropout on the LoRA input, target roles in each block."""

    name = "lora"
    rank: int = 8
    alpha: float = 8.0
    dropout: float = 0.0
    targets: tuple[str, ...] = ("query", "value")

    def __post_init__(self) -> None:
        check_positive_int("lora", "rank", self.rank)
        require(self.alpha > 0, "lora", f"alpha must be > 0, got {self.alpha!r}")
        require(0 <= self.dropout < 1, "lora", f"dropout must be in [0, 1), got {self.dropout!r}")
        require(len(self.targets) > 0, "lora", "targets must name at least one role")
        for role in self.targets:
            require(role in ROLES, "lora", f"unknown target {role!r}; roles: {', '.join(ROLES)}")


class LoRA(SiteModule):
    """The low-rank pair (A, B) of one linear layer: delta(x) = (alpha / r) B A x."""

    mergeable = True

    def __init__(self, layer: nn.Linear, config: LoRAConfig, generator: torch.Generator) -> None:
        super().__init__()
        self.A = nn.Parameter(torch.empty(config.rank, layer.in_features))
        self.B = nn.Parameter(torch.zeros(layer.out_features, config.rank))
        nn.init.kaiming_uniform_(self.A, a=math.sqrt(5), generator=generator)
        self.dropout = nn.Dropout(config.dropout) if config.dropout > 0 else nn.Identity()
        self.scaling = config.alpha / config.rank

    def weight_delta(self) -> torch.Tensor:
        """The weight update (alpha / r) B A."""
        return (self.B @ self.A) * self.scaling

    def delta(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(F.linear(self.dropout(x), self.A), self.B) * self.scaling

    @torch.no_grad()
    def merge_into(self, layer: nn.Module) -> None:
        """Fold the update into `layer`'s weight; the dispatcher then skips this module."""
        assert isinstance(layer, nn.Linear)
        layer.weight += self.weight_delta().to(layer.weight.dtype)

    @torch.no_grad()
    def unmerge_from(self, layer: nn.Module) -> None:
        """Take the update back out of `layer`'s weight."""
        assert isinstance(layer, nn.Linear)
        layer.weight -= self.weight_delta().to(layer.weight.dtype)


def apply(
    model: nn.Module, backbone: Backbone, config: LoRAConfig, ctx: ApplyContext
) -> MethodResult:
    result = MethodResult()
    for target in (name for role in config.targets for name in backbone.modules_with_role(role)):
        layer = get_module(model, target)
        if not isinstance(layer, nn.Linear):
            raise ConfigError(f"lora: {target!r} is a {type(layer).__name__}, not a linear layer")
        require(
            config.rank <= min(layer.in_features, layer.out_features),
            "lora",
            f"rank {config.rank} exceeds the full rank {min(layer.in_features, layer.out_features)}"
            f" of {target!r}",
        )
        lora = LoRA(layer, config, ctx.generator(target))
        result.insertions.append(Insertion(target, lora, reads=target))
    return result


register(
    Method(
        "lora",
        LoRAConfig,
        apply,
        "low-rank update of chosen linear layers (default query, value)",
        sites=lambda config: frozenset(config.targets),
    )
)
