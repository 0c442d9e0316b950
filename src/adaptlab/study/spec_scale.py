"""The scale keys of a study spec that are axes of its grid: `precision` and `quantize`, each
one value or a list crossed with the rest of the grid (`quantize: [none, nf4]`: LoRA against
QLoRA in one study), and the label that tells the cells of those axes apart."""

from __future__ import annotations

from typing import Annotated, Final

from pydantic import PlainValidator

from adaptlab.models.quantize import QUANTIZE_KINDS
from adaptlab.records.scale import PRECISIONS, Scale
from adaptlab.study.spec_fields import refuse_repeats

NO_QUANTIZE: Final = "none"
"""How a spec names a base left unquantised (YAML's null means the same)."""

SCALE_AXES: Final = ("precision", "quantize")
"""The scale keys a spec may give as a list, in the order a label names them."""


def _listed(values: tuple[str, ...]) -> str:
    """`a, b or c`."""
    return f"{', '.join(values[:-1])} or {values[-1]}"


def _axis(name: str, allowed: tuple[str, ...], value: object) -> tuple[str, ...]:
    """One allowed value, or a non-empty list of distinct ones, as a tuple."""
    values = value if isinstance(value, list) and value else [value]
    for item in values:
        if not isinstance(item, str) or item not in allowed:
            raise ValueError(f"{name} must be {_listed(allowed)}, or a list of them; got {item!r}")
    refuse_repeats(values)
    return tuple(values)


def _precisions(value: object) -> tuple[str, ...]:
    """`precision:` as the tuple of its values."""
    return _axis("precision", PRECISIONS, value)


def _quantizations(value: object) -> tuple[str | None, ...]:
    """`quantize:` as the tuple of its values, None for `none` (or null)."""

    def named(item: object) -> object:
        return NO_QUANTIZE if item is None else item

    written = [named(item) for item in value] if isinstance(value, list) else named(value)
    kinds = _axis("quantize", (NO_QUANTIZE, *QUANTIZE_KINDS), written)
    return tuple(None if kind == NO_QUANTIZE else kind for kind in kinds)


Precisions = Annotated[tuple[str, ...], PlainValidator(_precisions)]
"""`precision:`: one of auto, fp32, bf16, fp16, or a list of them."""
Quantizations = Annotated[tuple[str | None, ...], PlainValidator(_quantizations)]
"""`quantize:`: none, nf4 or int8, or a list of them (None: unquantised)."""


def scale_label(axes: tuple[str, ...], scale: Scale) -> str:
    """What a cell's label adds for the scale axes the study varies (`axes`): " · precision=bf16,
    quantize=nf4"; "" where it varies none."""
    if not axes:
        return ""
    values = {"precision": scale.precision, "quantize": scale.quantize or NO_QUANTIZE}
    return " · " + ", ".join(f"{axis}={values[axis]}" for axis in axes)
