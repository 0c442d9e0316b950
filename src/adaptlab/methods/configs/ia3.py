"""(IA)3's options (Liu et al. 2022, §3.3: keys, values and the FFN activation; lr 3e-3); the
method is `adaptlab.methods.ia3`."""

from __future__ import annotations

from dataclasses import dataclass

from adaptlab.methods.config import MethodConfig, require
from adaptlab.methods.registry import Method, register

TARGETS = {"key": "key", "value": "value", "ffn": "ffn_out"}
"""Target -> the role of the linear layer whose output (key, value) or input (ffn) is scaled."""
SITES = {"key": "key", "value": "value", "ffn": "ffn_activation"}

IA3_LR = 3e-3
"""Liu et al. 2022 §3.3 (T-Few): learning rate 3e-3."""


@dataclass(frozen=True)
class IA3Config(MethodConfig):
    """targets: which of key, value, ffn (the FFN's intermediate activation) are rescaled."""

    name = "ia3"
    default_learning_rate = IA3_LR
    generation_learning_rate = 3e-2  # examples/generative-defaults.yaml (docs/generative.md)
    targets: tuple[str, ...] = ("key", "value", "ffn")

    def __post_init__(self) -> None:
        require(len(self.targets) > 0, "ia3", "targets must name at least one of key, value, ffn")
        for target in self.targets:
            require(
                target in TARGETS,
                "ia3",
                f"unknown target {target!r}; targets: {', '.join(TARGETS)}",
            )
        require(len(set(self.targets)) == len(self.targets), "ia3", "a target is given twice")


register(
    Method(
        "ia3",
        IA3Config,
        "(IA)3: learned rescaling of keys, values and the FFN activation (+ head)",
        "adaptlab.methods.ia3",
        sites=lambda config: frozenset(SITES[t] for t in config.targets),
        mergeable=True,
    )
)
