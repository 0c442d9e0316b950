"""BitFit has no options; the method is `adaptlab.methods.bitfit`."""

from __future__ import annotations

from dataclasses import dataclass

from adaptlab.methods.config import MethodConfig
from adaptlab.methods.registry import Method, register


@dataclass(frozen=True)
class BitFitConfig(MethodConfig):
    """BitFit has no options."""

    name = "bitfit"


register(
    Method(
        "bitfit",
        BitFitConfig,
        "bias terms only (+ head)",
        "adaptlab.methods.bitfit",
        trains_base_weights=True,
    )
)
