"""The software a run ran on, as its record writes it."""

from __future__ import annotations

import platform
from dataclasses import dataclass

from adaptlab.records.jsonfields import JsonObject
from adaptlab.version import __version__


@dataclass(frozen=True)
class Versions:
    """The software a run ran on."""

    adaptlab: str
    torch: str
    transformers: str
    python: str

    @classmethod
    def current(cls) -> Versions:
        """The versions in this process (which has run a model: torch is loaded already)."""
        import torch
        import transformers

        python = platform.python_version()
        return cls(__version__, torch.__version__, transformers.__version__, python)

    def to_dict(self) -> dict[str, str]:
        return {
            "adaptlab": self.adaptlab,
            "torch": self.torch,
            "transformers": self.transformers,
            "python": self.python,
        }

    @classmethod
    def from_json(cls, versions: JsonObject) -> Versions:
        versions.refuse_unknown(("adaptlab", "torch", "transformers", "python"))
        return cls(
            *(versions.text(name) for name in ("adaptlab", "torch", "transformers", "python"))
        )
