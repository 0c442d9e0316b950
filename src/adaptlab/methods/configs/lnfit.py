"""LN-tuning has no options; the method is `adaptlab.methods.lnfit`."""

from __future__ import annotations

from dataclasses import dataclass

from adaptlab.methods.config import MethodConfig
from adaptlab.methods.registry import Method, register


@dataclass(frozen=True)
class LNFitConfig(MethodConfig):
    """LN-tuning has no options."""

    name = "lnfit"


register(
    Method(
        "lnfit",
        LNFitConfig,
        "LayerNorm / RMSNorm parameters only (+ head)",
        "adaptlab.methods.lnfit",
        trains_base_weights=True,
    )
)
