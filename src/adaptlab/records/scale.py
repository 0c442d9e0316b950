"""How a run uses its hardware: numeric precision, the frozen base's dtype or quantisation,
activation checkpointing and offloading. One record, set once on a run (or a sequence) and
applied by the one loop and the one model preparation (`adaptlab.engine.scale_model`), so every
method, composition, task and continual strategy inherits it.

Mixed precision follows Micikevicius et al. 2018 (forward and backward under autocast, float32
master copies of what trains, dynamic loss scaling for fp16); a 4-bit base is QLoRA's (Dettmers
et al. 2023: NF4 with double-quantised scales, computing in the run's precision).
Torch-free: records load without torch; "auto" is resolved where a run is built.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

from adaptlab.errors import ConfigError
from adaptlab.methods.scale import PRECISIONS as DTYPE_NAMES
from adaptlab.models.quantize import QUANTIZE_KINDS
from adaptlab.records.jsonfields import JsonObject

PRECISIONS = ("auto", *DTYPE_NAMES)
HALF = ("bf16", "fp16")


@dataclass(frozen=True)
class Scale:
    """`precision`: what forward and backward compute in ("auto": bf16 on a GPU that supports
    it, else fp32). `base_dtype`: the frozen base weights' dtype (what trains stays float32).
    `quantize`: the base's linear layers in 4-bit NF4 or 8-bit. `gradient_checkpointing` and
    `offload_activations`: see `adaptlab.engine.checkpointing`."""

    precision: str = "fp32"
    base_dtype: str = "fp32"
    gradient_checkpointing: bool = False
    offload_activations: bool = False
    quantize: str | None = None

    def __post_init__(self) -> None:
        _one_of(self.precision, PRECISIONS, "precision")
        _one_of(self.base_dtype, DTYPE_NAMES, "base-dtype")
        if self.quantize is not None:
            _one_of(self.quantize, QUANTIZE_KINDS, "quantize")
        for name in ("gradient_checkpointing", "offload_activations"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"{name} must be true or false, got {getattr(self, name)!r}")
        if self.base_dtype in HALF and self.precision not in (self.base_dtype, "auto"):
            raise ConfigError(
                f"base-dtype {self.base_dtype} computes in {self.base_dtype}: use --precision "
                f"{self.base_dtype} with it (precision is {self.precision})"
            )

    def resolved(self, device: str) -> Scale:
        """This scale with precision "auto" decided for `device` (a resolved device name)."""
        if self.precision != "auto":
            return self
        if self.base_dtype in HALF:
            precision = self.base_dtype
        else:
            from adaptlab.models.device import auto_precision

            precision = auto_precision(device)
        return replace(self, precision=precision)

    @property
    def is_default(self) -> bool:
        """Whether this is full float32 training, as adaptlab 0.1.0 did (records omit it)."""
        return self == Scale()

    def describe(self) -> str:
        """One phrase for logs: "bf16, base nf4, checkpointing"."""
        parts = [self.precision]
        if self.quantize:
            parts.append(f"base {self.quantize}")
        elif self.base_dtype != "fp32":
            parts.append(f"base {self.base_dtype}")
        if self.gradient_checkpointing:
            parts.append("checkpointing")
        if self.offload_activations:
            parts.append("offloaded activations")
        return ", ".join(parts)

    @property
    def frozen_base(self) -> str | None:
        """What keeps the base frozen ("nf4", "bf16", ...): a quantised or half-precision base;
        None for a float32 one."""
        return self.quantize or (self.base_dtype if self.base_dtype in HALF else None)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, scale: JsonObject) -> Scale:
        """The scale `to_dict` wrote, read field by field (a missing field is its default)."""
        scale.refuse_unknown(cls().to_dict())
        return cls(
            precision=scale.text("precision", "fp32"),
            base_dtype=scale.text("base_dtype", "fp32"),
            gradient_checkpointing=scale.boolean("gradient_checkpointing", False),
            offload_activations=scale.boolean("offload_activations", False),
            quantize=scale.optional_text("quantize"),
        )


def resolve_auto(device: str, scale: Scale) -> tuple[str, Scale]:
    """`device` and `scale` with "auto" decided for this machine (torch is imported only then)."""
    if device != "auto" and scale.precision != "auto":
        return device, scale
    from adaptlab.models.device import device_name

    device = device_name(device)
    return device, scale.resolved(device)


def _one_of(value: object, allowed: tuple[str, ...], name: str) -> None:
    if value not in allowed:
        raise ConfigError(f"{name} must be one of {', '.join(allowed)}; got {value!r}")
