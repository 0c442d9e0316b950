"""How an adapter was trained, as its manifest records it (`scale`): the numeric precision,
the frozen base's dtype and its quantisation. Torch-free: manifests are read without it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from adaptlab.errors import ConfigError
from adaptlab.models.quantize import QUANTIZE_KINDS

PRECISIONS = ("fp32", "bf16", "fp16")
"""What a run computes in, and what its frozen base weights are held in."""


@dataclass(frozen=True)
class TrainingScale:
    """How an adapter was trained: the precision forward and backward ran in, the dtype of the
    frozen base weights, and the base's quantisation (None, nf4, int8). It says how, not on
    what: the adapter loads onto any form of its base (see `adaptlab.models.quantize`)."""

    precision: str
    base_dtype: str
    quantize: str | None = None

    def __post_init__(self) -> None:
        for option, value, allowed in (
            ("precision", self.precision, PRECISIONS),
            ("base_dtype", self.base_dtype, PRECISIONS),
            ("quantize", self.quantize, (*QUANTIZE_KINDS, None)),
        ):
            if value not in allowed or isinstance(value, bool):
                shown = ", ".join(str(a).lower() for a in allowed)
                raise ConfigError(f"training scale: {option} must be one of {shown}, got {value!r}")

    def to_dict(self) -> dict[str, Any]:
        """The manifest's `scale` object."""
        return {
            "precision": self.precision,
            "base_dtype": self.base_dtype,
            "quantize": self.quantize,
        }
