"""The linear probe has no options; the method is `adaptlab.methods.head`."""

from __future__ import annotations

from dataclasses import dataclass

from adaptlab.methods.config import MethodConfig
from adaptlab.methods.registry import Method, register


@dataclass(frozen=True)
class HeadConfig(MethodConfig):
    """The head alone trains; it has no options."""

    name = "head"


register(
    Method(
        "head",
        HeadConfig,
        "linear probe: body frozen, task head trains",
        "adaptlab.methods.head",
        exclusive=True,
    )
)
