"""The methods of a study's grid as the spec writes them: `houlsby`, `lora+bitfit`,
`{houlsby: {hidden_size: 64}}` or `{method: ..., epochs: ...}`, and the adapters a method
fuses or stacks on."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, PlainValidator, PositiveInt, model_validator

from adaptlab.errors import ConfigError
from adaptlab.methods.compose import fusion_in, resolve
from adaptlab.methods.configs.fusion import FUSION
from adaptlab.study.spec_fields import LearningRates, StrictModel, options_label

MethodParts = tuple[tuple[str, dict[str, Any]], ...]
"""A method or combination as written: (name, options given in the spec) per part."""

_OVERRIDES = ("epochs", "batch_size", "learning_rates", "label", "stack")
_REFERENCES = ("adapters",)
"""Keys of a method's options that name adapters rather than configure the method."""


def _method_parts(value: object) -> MethodParts:
    """Normalise `houlsby`, `lora+bitfit` or `{houlsby: {hidden_size: 64}}` and validate it."""
    if isinstance(value, str):
        parts: MethodParts = tuple((name.strip(), {}) for name in value.split("+"))
    elif isinstance(value, dict) and value:
        overrides = [key for key in _OVERRIDES if key in value]
        if overrides:
            raise ValueError(
                f"to set {overrides[0]} for one method write "
                f"{{method: ..., {overrides[0]}: ...}}, e.g. {{method: houlsby, epochs: 3}}"
            )
        if not all(isinstance(o, dict | None) for o in value.values()):
            raise ValueError("method options must be a mapping, e.g. {houlsby: {hidden_size: 64}}")
        parts = tuple(
            (str(name), {k: v for k, v in (options or {}).items() if k not in _REFERENCES})
            for name, options in value.items()
        )
    else:
        raise ValueError(
            "a method is a name (houlsby, lora+bitfit), {name: {option: value}}, "
            "or {method: ..., epochs: ...}"
        )
    method = [{name: options} for name, options in parts]
    try:
        if fusion_in(method) is None:
            resolve(method, {})
    except ConfigError as error:
        raise ValueError(str(error)) from None
    return parts


MethodSpecField = Annotated[MethodParts, PlainValidator(_method_parts)]

AdapterRefs = Annotated[list[Annotated[str, Field(min_length=1)]] | None, Field(min_length=1)]
"""Adapters a run builds on: source labels, labels of other methods (the run of the same
cell), or trained run / adapter folders."""


class MethodEntry(StrictModel):
    """One method of the grid, with optional per-method epochs, batch size and learning rates.

    `adapters` (for `fusion`): the adapters to fuse; `stack`: frozen adapters the method's
    adapter runs on top of (bottom first).
    """

    method: MethodSpecField
    epochs: PositiveInt | None = None
    batch_size: PositiveInt | None = None
    learning_rates: LearningRates | None = None
    label: Annotated[str, Field(min_length=1)] | None = None
    adapters: AdapterRefs = None
    stack: AdapterRefs = None

    @model_validator(mode="before")
    @classmethod
    def _short_form(cls, value: object) -> object:
        """`houlsby` and `{houlsby: {...}}` are short for `{method: ...}`; the adapters of
        `{fusion: {adapters: [...], temperature: 2}}` move to `adapters`."""
        if isinstance(value, dict) and "method" in value:
            return value
        entry: dict[str, object] = {"method": value}
        if isinstance(value, dict):
            for options in value.values():
                if isinstance(options, dict) and "adapters" in options:
                    entry["adapters"] = options["adapters"]
        return entry

    @model_validator(mode="after")
    def _references(self) -> MethodEntry:
        fusion = self.is_fusion
        if fusion and not self.adapters:
            raise ValueError("fusion needs the adapters to fuse: {fusion: {adapters: [...]}}")
        if self.adapters and not fusion:
            raise ValueError("adapters: names what a fusion fuses; the method must be fusion")
        if fusion and self.stack:
            raise ValueError("a fusion runs over the adapters it fuses; drop stack:")
        return self

    @property
    def is_fusion(self) -> bool:
        """Whether the method is `fusion` alone (it fuses the adapters `adapters` names)."""
        return [name for name, _ in self.method] == [FUSION]

    @property
    def references(self) -> tuple[str, ...]:
        """The adapters this method builds on (fused or stacked on)."""
        return tuple(self.adapters or self.stack or ())

    @property
    def display_label(self) -> str:
        """`label`, or the method with the options written in the spec: `houlsby(hidden_size=64)`"""
        if self.label:
            return self.label
        return "+".join(name + options_label(options) for name, options in self.method)

    def run_method(self) -> list[dict[str, dict[str, Any]]]:
        """The method as `RunSpec.build` takes it."""
        return [{name: dict(options)} for name, options in self.method]
