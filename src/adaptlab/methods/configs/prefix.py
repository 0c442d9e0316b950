"""Prefix tuning's options (Li & Liang 2021, §4.3; He et al. 2022, §4.5: l = 30, an MLP of
width 512 while training); the method is `adaptlab.methods.prefix`."""

from __future__ import annotations

from dataclasses import dataclass, replace

from adaptlab.methods.config import MethodConfig, check_positive_int, require
from adaptlab.methods.registry import Method, register

SITES = ("attention_prefix",)
MAX_LENGTH, MAX_HIDDEN = 4096, 16384
"""Bounds that keep a manifest from asking for absurd allocations (Li & Liang use l <= 200)."""


@dataclass(frozen=True)
class PrefixConfig(MethodConfig):
    """length l of the prefix; reparameterize: train it through an MLP of width
    reparam_hidden (folded away when saved)."""

    name = "prefix"
    generation_learning_rate = 5e-4  # examples/generative-defaults.yaml (docs/generative.md)
    length: int = 30
    reparameterize: bool = True
    reparam_hidden: int = 512

    def __post_init__(self) -> None:
        check_prefix("prefix", "length", self.length, "reparam_hidden", self.reparam_hidden)

    def folded(self) -> PrefixConfig:
        return replace(self, reparameterize=False)


def check_prefix(
    method: str, length_option: str, length: int, hidden_option: str, hidden: int
) -> None:
    """A prefix length and an MLP width: positive and within `MAX_LENGTH`, `MAX_HIDDEN`."""
    check_positive_int(method, length_option, length)
    check_positive_int(method, hidden_option, hidden)
    require(length <= MAX_LENGTH, method, f"{length_option} must be at most {MAX_LENGTH}")
    require(hidden <= MAX_HIDDEN, method, f"{hidden_option} must be at most {MAX_HIDDEN}")


register(
    Method(
        "prefix",
        PrefixConfig,
        "prefix tuning: l learned keys and values in every attention (+ head)",
        "adaptlab.methods.prefix",
        sites=lambda config: frozenset(SITES),
    )
)
