"""The methods of a study's grid as the spec writes them: `houlsby`, `lora+bitfit`,
`{houlsby: {hidden_size: 64}}` or `{method: ..., epochs: ...}`, the adapters a method fuses,
stacks on or combines, and the entries that span the study's data sets (`combine`,
`across_data`, `multi_task`)."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Annotated, Any

from pydantic import Field, PlainValidator, PositiveInt, model_validator

from adaptlab.errors import ConfigError
from adaptlab.methods.compose import fusion_in, resolve
from adaptlab.methods.configs.fusion import FUSION
from adaptlab.study.spec_combine import COMBINE, CombineOptions
from adaptlab.study.spec_fields import LearningRates, StrictModel, options_label

MethodParts = tuple[tuple[str, dict[str, Any]], ...]
"""A method or combination as written: (name, options given in the spec) per part."""

_OVERRIDES = (
    "epochs",
    "batch_size",
    "learning_rates",
    "label",
    "stack",
    "across_data",
    "multi_task",
)
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
    adapter runs on top of (bottom first). Entries that span the study's data sets: `combine`
    (trained adapters combined without training, `spec_combine`) and `across_data` (a fusion)
    build on the adapters of the one method `adapters` names, trained on every data set of the
    cell's seed, model, size and scale; `multi_task` trains one adapter on every data set
    together and scores it on each.
    """

    method: MethodSpecField | None = None
    combine: CombineOptions | None = None
    epochs: PositiveInt | None = None
    batch_size: PositiveInt | None = None
    learning_rates: LearningRates | None = None
    label: Annotated[str, Field(min_length=1)] | None = None
    adapters: AdapterRefs = None
    stack: AdapterRefs = None
    across_data: bool = False
    multi_task: bool = False

    @model_validator(mode="before")
    @classmethod
    def _short_form(cls, value: object) -> object:
        """`houlsby` and `{houlsby: {...}}` are short for `{method: ...}`; the adapters of
        `{fusion: {adapters: [...], temperature: 2}}` move to `adapters`."""
        if isinstance(value, dict) and ("method" in value or COMBINE in value):
            return value
        entry: dict[str, object] = {"method": value}
        if isinstance(value, dict):
            for options in value.values():
                if isinstance(options, dict) and "adapters" in options:
                    entry["adapters"] = options["adapters"]
        return entry

    @model_validator(mode="after")
    def _references(self) -> MethodEntry:
        if self.combine is not None:
            return self._combining()
        if self.method is None:
            raise ValueError(
                "give method: (what to train) or combine: (trained adapters combined without "
                "training), e.g. {method: lora} or {combine: {how: linear}, adapters: [lora]}"
            )
        fusion = self.is_fusion
        if fusion and not self.adapters:
            raise ValueError("fusion needs the adapters to fuse: {fusion: {adapters: [...]}}")
        if self.adapters and not fusion:
            raise ValueError("adapters: names what a fusion fuses; the method must be fusion")
        if fusion and self.stack:
            raise ValueError("a fusion runs over the adapters it fuses; drop stack:")
        if self.across_data and not fusion:
            raise ValueError(
                "across_data: is for a fusion over one method's adapters of every data set; "
                "the method must be fusion"
            )
        if self.across_data:
            _one_method(self.adapters, "an across-data fusion fuses")
        if self.multi_task and (fusion or self.stack):
            raise ValueError(
                "multi_task: trains one new adapter on every data set together; "
                + ("it cannot be a fusion" if fusion else "drop stack:")
            )
        return self

    def _combining(self) -> MethodEntry:
        """A combine entry names one method to combine and trains nothing."""
        if self.method is not None:
            raise ValueError(
                "give method: (what to train) or combine: (trained adapters combined), not both"
            )
        trains = ("epochs", "batch_size", "learning_rates", "stack", "across_data", "multi_task")
        given = [key for key in trains if getattr(self, key)]
        if given:
            raise ValueError(f"combine: trains nothing; drop {given[0]}:")
        if not self.adapters:
            raise ValueError(
                "combine: needs the method whose adapters to combine, e.g. "
                "{combine: {how: linear}, adapters: [lora]}"
            )
        _one_method(self.adapters, "combine: combines")
        return self

    @property
    def is_fusion(self) -> bool:
        """Whether the method is `fusion` alone (it fuses the adapters `adapters` names)."""
        return self.method is not None and [name for name, _ in self.method] == [FUSION]

    @property
    def spans_data(self) -> bool:
        """Whether the entry's runs build on, or train on, every data set of the study: a
        combine, an across-data fusion, a multi-task method."""
        return self.combine is not None or self.across_data or self.multi_task

    @property
    def references(self) -> tuple[str, ...]:
        """The adapters this method builds on (fused, stacked on or combined)."""
        return tuple(self.adapters or self.stack or ())

    @property
    def display_label(self) -> str:
        """`label`, or the method with the options written in the spec: `houlsby(hidden_size=64)`,
        `combine(how=ties, density=0.5)`"""
        if self.label:
            return self.label
        if self.combine is not None:
            return self.combine.label
        assert self.method is not None  # checked: an entry without combine has one
        return "+".join(name + options_label(options) for name, options in self.method)

    def run_method(self) -> list[dict[str, dict[str, Any]]]:
        """The method as `RunSpec.build` takes it."""
        assert self.method is not None  # a combine entry trains nothing
        return [{name: dict(options)} for name, options in self.method]


def _one_method(adapters: list[str] | None, what: str) -> None:
    """An entry spanning the data sets builds on one method's adapters."""
    if adapters is not None and len(adapters) != 1:
        raise ValueError(
            f"{what} the adapters one method trained on every data set: name one method in "
            f"adapters:, got {len(adapters)}"
        )


def check_spanning(
    entries: Sequence[MethodEntry],
    data_sets: int,
    study_rates: LearningRates,
    sources: Collection[str],
) -> None:
    """The entries that span the data sets (`MethodEntry.spans_data`) have at least two data
    sets, build on one method of the study trained on its own at one learning rate, and a
    combine gives one weight per data set (`data_sets` of them)."""
    by_label = {entry.display_label: entry for entry in entries}
    for entry in entries:
        if not entry.spans_data:
            continue
        label = entry.display_label
        if data_sets < 2:
            raise ValueError(
                f"method {label} {_spans(entry)} every data set of the study; it needs at least "
                f"two in data: (got {data_sets})"
            )
        if entry.combine is not None and entry.combine.weights is not None:
            given = len(entry.combine.weights)
            if given != data_sets:
                raise ValueError(
                    f"method {label}: combine: gives {given} weights for {data_sets} data sets; "
                    "give one per data set, in the order of data:"
                )
        for reference in entry.adapters or ():
            _check_built_on(label, reference, by_label, study_rates, sources)


def _spans(entry: MethodEntry) -> str:
    """What an entry spanning the data sets does with them."""
    if entry.combine is not None:
        return "combines the adapters of"
    return "fuses the adapters of" if entry.across_data else "trains one adapter on"


def _check_built_on(
    label: str,
    reference: str,
    by_label: Mapping[str, MethodEntry],
    study_rates: LearningRates,
    sources: Collection[str],
) -> None:
    """`reference` names a method trained on its own, at one learning rate."""
    start = f"method {label} builds on {reference!r}"
    if reference in sources:
        raise ValueError(
            f"{start}, a source; name a method of the study, trained on every data set"
        )
    built_on = by_label.get(reference)
    if built_on is None:
        raise ValueError(f"{start}, which is no method of the study")
    if built_on.spans_data or built_on.references:
        raise ValueError(
            f"{start}, which builds on other adapters itself; name a method trained on its own"
        )
    rates = built_on.learning_rates or study_rates
    if not isinstance(rates, str) and len(rates) != 1:
        raise ValueError(
            f"{start}, which has {len(rates)} learning rates; give it one, e.g. "
            f"learning_rates: [{rates[0]:g}]"
        )
