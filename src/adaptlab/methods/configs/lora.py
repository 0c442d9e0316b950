"""LoRA's options (Hu et al. 2022, §4-5: rank 8, alpha 8, the query and value projections;
DoRA, Liu et al. 2024, on request); the method is `adaptlab.methods.lora`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from adaptlab.backbone.roles import ROLES
from adaptlab.methods.config import ADDED, MethodConfig, check_positive_int, require
from adaptlab.methods.registry import Method, register


@dataclass(frozen=True)
class LoRAConfig(MethodConfig):
    """rank r, scaling alpha / r, dropout on the LoRA input, target roles in each block; dora:
    a learned magnitude per output (DoRA)."""

    name = "lora"
    generation_learning_rate = 2e-3  # examples/generative-defaults.yaml (docs/generative.md)
    rank: int = 8
    alpha: float = 8.0
    dropout: float = 0.0
    targets: tuple[str, ...] = ("query", "value")
    dora: bool = field(default=False, metadata=ADDED)

    @classmethod
    def generation_defaults(cls, options: Mapping[str, Any]) -> dict[str, Any]:
        """For a task that generates text, every linear layer of each block and alpha = 2r
        (Biderman et al. 2024, §3-4), as examples/generative-defaults.yaml measured best."""
        rank = options.get("rank", cls.rank)
        return {
            "targets": ROLES,
            "alpha": 2.0 * rank if isinstance(rank, int) else cls.alpha,
        } | dict(options)

    def __post_init__(self) -> None:
        check_positive_int("lora", "rank", self.rank)
        require(self.alpha > 0, "lora", f"alpha must be > 0, got {self.alpha!r}")
        require(0 <= self.dropout < 1, "lora", f"dropout must be in [0, 1), got {self.dropout!r}")
        require(len(self.targets) > 0, "lora", "targets must name at least one role")
        for role in self.targets:
            require(role in ROLES, "lora", f"unknown target {role!r}; roles: {', '.join(ROLES)}")


register(
    Method(
        "lora",
        LoRAConfig,
        "low-rank update of chosen linear layers (default query, value); dora: DoRA",
        "adaptlab.methods.lora",
        sites=lambda config: frozenset(config.targets),
        mergeable=True,
    )
)
