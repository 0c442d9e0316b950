"""The study spec: a validated grid of runs, read from YAML with errors that name key and line.

    name: low-resource
    models: [minilm-l6]
    data: [rotten-tomatoes, {reviews.csv: {label_column: stars}}]
    methods: [full, {houlsby: {hidden_size: 64}}, {method: lora, epochs: 20}]
    train_sizes: [1000, 5000]       # null: the whole training split
    seeds: [0, 1, 2]
    learning_rates: default         # each method's own default, or a list crossed with every method
    epochs: 10
    analysis: [rsa, landscape]      # optional: per-layer RSA / CKA against the base, landscapes
    metric: macro_f1                # optional: what judges methods (default: fits the data)

A sequence study gives `sequence:` (stages in training order) and `strategies:` instead of
`data:`; its grid is models x methods x strategies x train sizes x seeds x learning rates.

docs/studies.md documents every key.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Any, Final, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    NonNegativeFloat,
    PlainValidator,
    PositiveFloat,
    PositiveInt,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from adaptlab.analysis.tokens import DEFAULT_TOKENS
from adaptlab.checks import MAX_SEED
from adaptlab.data.builtin import BUILTINS
from adaptlab.errors import ConfigError
from adaptlab.methods.compose import resolve
from adaptlab.study.analysis import AnalysisName
from adaptlab.study.yamlfile import YamlDocument, read_yaml
from adaptlab.train.continual.spec import LM_STRATEGIES, Objective
from adaptlab.train.continual.strategy import StrategyConfig, strategy_config
from adaptlab.train.metrics import METRICS

MethodParts = tuple[tuple[str, dict[str, Any]], ...]
"""A method or combination as written: (name, options given in the spec) per part."""

DEFAULT: Final = "default"
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
    try:
        resolve([{name: options} for name, options in parts], {})
    except ConfigError as error:
        raise ValueError(str(error)) from None
    return parts


def _learning_rates(value: object) -> tuple[float, ...] | Literal["default"]:
    """`default`, or a non-empty list of distinct numbers in (0, 1)."""
    if value == DEFAULT:
        return DEFAULT
    if not isinstance(value, list) or not value:
        raise ValueError("must be `default` or a list of numbers such as [1e-4, 3e-4]")
    for index, rate in enumerate(value):
        if isinstance(rate, bool) or not isinstance(rate, int | float) or not 0 < rate < 1:
            raise ValueError(f"item {index} must be a number in (0, 1), got {rate!r}")
    _refuse_repeats(value)
    return tuple(float(rate) for rate in value)


def _refuse_repeats(values: Iterable[object]) -> None:
    seen: list[object] = []
    for value in values:
        if value in seen:
            raise ValueError(f"{value!r} is listed twice")
        seen.append(value)


Seed = Annotated[int, Field(ge=0, le=MAX_SEED)]
"""A seed every random generator takes (adaptlab.checks)."""
MethodSpecField = Annotated[MethodParts, PlainValidator(_method_parts)]
LearningRates = Annotated[tuple[float, ...] | Literal["default"], PlainValidator(_learning_rates)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


AdapterRefs = Annotated[list[Annotated[str, Field(min_length=1)]] | None, Field(min_length=1)]
"""Adapters a run builds on: source labels, labels of other methods (the run of the same
cell), or trained run / adapter folders."""


class MethodEntry(_Strict):
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
        fusion = [name for name, _ in self.method] == ["fusion"]
        if fusion and not self.adapters:
            raise ValueError("fusion needs the adapters to fuse: {fusion: {adapters: [...]}}")
        if self.adapters and not fusion:
            raise ValueError("adapters: names what a fusion fuses; the method must be fusion")
        if fusion and self.stack:
            raise ValueError("a fusion runs over the adapters it fuses; drop stack:")
        return self

    @property
    def references(self) -> tuple[str, ...]:
        """The adapters this method builds on (fused or stacked on)."""
        return tuple(self.adapters or self.stack or ())

    @property
    def display_label(self) -> str:
        """`label`, or the method with the options written in the spec: `houlsby(hidden_size=64)`"""
        if self.label:
            return self.label
        return "+".join(name + _options_label(options) for name, options in self.method)

    def run_method(self) -> list[dict[str, dict[str, Any]]]:
        """The method as `RunSpec.build` takes it."""
        return [{name: dict(options)} for name, options in self.method]


def _options_label(options: dict[str, Any]) -> str:
    if not options:
        return ""
    text = ", ".join(
        f"{key}={value if isinstance(value, str) else json.dumps(value)}"
        for key, value in options.items()
    )
    return f"({text})"


class DataOptions(_Strict):
    """How to read a data file (as `adaptlab train`'s column options); built-ins ignore them."""

    text_column: str | None = None
    text_pair_column: str | None = None
    label_column: str | None = None
    task: Literal["single_label", "multi_label", "token", "regression", "mlm"] | None = None
    label_separator: str | None = None
    split: Literal["random", "chronological"] | None = None
    time_column: str | None = None

    def as_kwargs(self) -> dict[str, str]:
        """The options given, as `load_dataset` keywords."""
        return {k: v for k, v in self.model_dump().items() if v is not None}


class DataEntry(_Strict):
    """A data source (built-in name, file, folder or hf:NAME) and its reading options."""

    source: Annotated[str, Field(min_length=1)]
    options: DataOptions = DataOptions()

    @model_validator(mode="before")
    @classmethod
    def _short_form(cls, value: object) -> object:
        """`rotten-tomatoes` or `{reviews.csv: {label_column: stars}}`."""
        if isinstance(value, str):
            return {"source": value}
        if isinstance(value, dict) and len(value) == 1:
            ((source, options),) = value.items()
            return {"source": source, "options": options if options is not None else {}}
        raise ValueError(
            "a data entry is a name or path, or {path: {label_column: ..., text_column: ...}}"
        )


class ZeroShotEntry(_Strict):
    """A data set every grid run is also scored on, zero-shot (its test split, labels matched
    by name); `stack_swap` runs, for it, another adapter in place of a stacked one (MAD-X:
    {lang-en: lang-sl}, each a source label or an adapter folder)."""

    data: DataEntry
    stack_swap: dict[Annotated[str, Field(min_length=1)], Annotated[str, Field(min_length=1)]] = {}

    @model_validator(mode="before")
    @classmethod
    def _short_form(cls, value: object) -> object:
        """`slovenian-opinions` is short for `{data: slovenian-opinions}`."""
        return {"data": value} if isinstance(value, str) else value


def _strategy_parts(value: object) -> tuple[str, dict[str, Any]]:
    """Normalise `replay` or `{replay: {rate: 0.05}}` and validate it."""
    if isinstance(value, str):
        name, options = value, {}
    elif isinstance(value, dict) and len(value) == 1:
        ((name, given),) = value.items()
        if not isinstance(given, dict | None):
            raise ValueError("strategy options must be a mapping, e.g. {replay: {rate: 0.05}}")
        name, options = str(name), dict(given or {})
    else:
        raise ValueError(
            "a strategy is a name (replay), {name: {option: value}}, or {strategy: ..., label: ...}"
        )
    try:
        strategy_config(name, options)
    except ConfigError as error:
        raise ValueError(str(error)) from None
    return name, options


StrategySpecField = Annotated[tuple[str, dict[str, Any]], PlainValidator(_strategy_parts)]


class StrategyEntry(_Strict):
    """One continual strategy of a sequence study, with an optional display label."""

    strategy: StrategySpecField
    label: Annotated[str, Field(min_length=1)] | None = None

    @model_validator(mode="before")
    @classmethod
    def _short_form(cls, value: object) -> object:
        """`replay` and `{replay: {rate: 0.05}}` are short for `{strategy: ...}`."""
        if isinstance(value, dict) and "strategy" in value:
            return value
        return {"strategy": value}

    @property
    def display_label(self) -> str:
        """`label`, or the strategy with the options written in the spec: `replay(rate=0.05)`"""
        name, options = self.strategy
        return self.label or name + _options_label(options)

    def config(self) -> StrategyConfig:
        """The validated strategy config."""
        return strategy_config(*self.strategy)


def _check_stage(entry: DataEntry) -> None:
    """A stage must be single-label classification, where that is known before loading."""
    builtin = BUILTINS.get(entry.source)
    task = builtin.task if builtin is not None else entry.options.task
    if task is not None and task != "single_label":
        raise ValueError(
            f"stage {entry.source} is a {task} task; sequences take single-label "
            "classification stages"
        )


class Resources(_Strict):
    """What one run needs from a Ray cluster (per task)."""

    cpus: PositiveFloat = 1.0
    gpus: NonNegativeFloat = 0.0


class SourceEntry(_Strict):
    """An adapter trained once per model, before the grid, for methods to fuse or stack on."""

    label: Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")]
    data: DataEntry
    method: MethodSpecField
    train_size: PositiveInt | None = None
    epochs: PositiveInt | None = None
    batch_size: PositiveInt | None = None
    learning_rate: Annotated[float, Field(gt=0, lt=1)] | None = None
    seed: Seed | None = None

    def run_method(self) -> list[dict[str, dict[str, Any]]]:
        """The method as `RunSpec.build` takes it."""
        return [{name: dict(options)} for name, options in self.method]


class StudySpec(_Strict):
    """A study: the grid models x data x train sizes x methods x learning rates x seeds."""

    name: str
    description: str = ""
    models: Annotated[list[Annotated[str, Field(min_length=1)]], Field(min_length=1)]
    data: list[DataEntry] = []
    objective: Objective = "classification"
    sequence: list[DataEntry] = []
    methods: Annotated[list[MethodEntry], Field(min_length=1)]
    strategies: list[StrategyEntry] = []
    train_sizes: Annotated[list[PositiveInt | None], Field(min_length=1)] = [None]
    seeds: Annotated[list[Seed], Field(min_length=1)] = [0]
    learning_rates: LearningRates = DEFAULT
    epochs: PositiveInt = 10
    batch_size: PositiveInt = 16
    max_length: Annotated[int, Field(ge=2)] = 128
    device: str = "cpu"
    resources: Resources = Resources()
    analysis: list[AnalysisName] = []
    analysis_tokens: Annotated[int, Field(ge=3)] = DEFAULT_TOKENS
    sources: list[SourceEntry] = []
    zero_shot: list[ZeroShotEntry] = []
    metric: str | None = None
    test_size: PositiveInt | None = None
    single_stage: bool = False

    @property
    def is_sequence(self) -> bool:
        """Whether the study trains sequences of stages (`sequence:`) rather than runs."""
        return bool(self.sequence)

    @field_validator("sequence")
    @classmethod
    def _stages(cls, values: list[DataEntry], info: ValidationInfo) -> list[DataEntry]:
        if values and info.data.get("data"):
            raise ValueError(
                "give data: (a run per data set) or sequence: (one model through the data "
                "sets in order), not both"
            )
        _refuse_repeats(entry.source for entry in values)
        if info.data.get("objective") == "classification":
            for entry in values:
                _check_stage(entry)
        return values

    @field_validator("strategies", "test_size", "single_stage")
    @classmethod
    def _needs_sequence(cls, value: object, info: ValidationInfo) -> object:
        if value and info.data.get("sequence") == []:  # absent (not: given and invalid)
            raise ValueError(f"{info.field_name} is for a sequence study; it needs sequence:")
        return value

    @field_validator("analysis", "sources", "zero_shot", "metric")
    @classmethod
    def _not_for_sequences(cls, value: object, info: ValidationInfo) -> object:
        if value and info.data.get("sequence"):
            raise ValueError(
                f"a sequence study takes no {info.field_name}: (sequences are judged by "
                "accuracy on every stage's test set)"
                if info.field_name == "metric"
                else f"a sequence study takes no {info.field_name}:"
            )
        return value

    @field_validator("strategies")
    @classmethod
    def _distinct_strategies(
        cls, values: list[StrategyEntry], info: ValidationInfo
    ) -> list[StrategyEntry]:
        if info.data.get("objective") == "causal-lm":
            for entry in values:
                name = entry.strategy[0]
                if name not in LM_STRATEGIES:
                    raise ValueError(
                        f"strategy {name} is for classification sequences; objective: "
                        f"causal-lm takes {', '.join(LM_STRATEGIES)}"
                    )
        labels = [entry.display_label for entry in values]
        for index, label in enumerate(labels):
            if label in labels[:index]:
                raise ValueError(
                    f"strategies {labels.index(label)} and {index} are both labelled "
                    f"{label!r}; remove one or give one a `label:`"
                )
        return values

    @model_validator(mode="after")
    def _data_or_sequence(self) -> StudySpec:
        if not self.data and not self.sequence:
            raise ValueError(
                "required key 'data' is missing (or 'sequence', for stages trained in order)"
            )
        if self.sequence and not self.strategies:
            raise ValueError("sequence: needs strategies:, e.g. strategies: [sequential, replay]")
        if self.objective != "classification" and not self.sequence:
            raise ValueError("objective is for a sequence study; it needs sequence:")
        if self.sequence:
            for entry in self.methods:
                if entry.references or [name for name, _ in entry.method] == ["fusion"]:
                    raise ValueError(
                        f"method {entry.display_label}: a sequence trains its own adapters; "
                        "fusion and stack: are not for sequences"
                    )
        return self

    @field_validator("metric")
    @classmethod
    def _metric(cls, value: str | None) -> str | None:
        known = list(dict.fromkeys(name for names in METRICS.values() for name in names))
        if value is not None and value not in known:
            raise ValueError(
                f"metric must be one a task computes where higher is better: "
                f"{', '.join(known)}; got {value!r}"
            )
        return value

    @field_validator("name")
    @classmethod
    def _file_name(cls, value: str) -> str:
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", value):
            raise ValueError(
                f"name must be letters, digits, '.', '_' or '-' (it names the results file), "
                f"got {value!r}"
            )
        return value

    @field_validator("device")
    @classmethod
    def _device(cls, value: str) -> str:
        if not re.fullmatch(r"cpu|mps|cuda(:[0-9]+)?", value):
            raise ValueError(f"device must be cpu, cuda, cuda:N or mps, got {value!r}")
        return value

    @field_validator("models", "train_sizes", "seeds", "analysis")
    @classmethod
    def _distinct(cls, values: list[Any]) -> list[Any]:
        _refuse_repeats(values)
        return values

    @field_validator("data")
    @classmethod
    def _distinct_data(cls, values: list[DataEntry]) -> list[DataEntry]:
        _refuse_repeats(entry.source for entry in values)
        return values

    @model_validator(mode="after")
    def _labels_name_one_thing(self) -> StudySpec:
        sources = [source.label for source in self.sources]
        _refuse_repeats(sources)
        methods = {entry.display_label for entry in self.methods}
        for label in sources:
            if label in methods:
                raise ValueError(f"{label!r} labels both a source and a method; rename one")
        return self

    @field_validator("methods")
    @classmethod
    def _distinct_labels(cls, values: list[MethodEntry]) -> list[MethodEntry]:
        labels = [entry.display_label for entry in values]
        for index, label in enumerate(labels):
            if label in labels[:index]:
                raise ValueError(
                    f"methods {labels.index(label)} and {index} are both labelled {label!r}; "
                    "remove one or give one a `label:`"
                )
        return values


_KNOWN_KEYS: dict[str, type[BaseModel]] = {
    "methods": MethodEntry,
    "sources": SourceEntry,
    "data": DataOptions,
    "sequence": DataOptions,
    "strategies": StrategyEntry,
    "resources": Resources,
    "zero_shot": ZeroShotEntry,
}


def load_spec(path: str | Path) -> StudySpec:
    """Read and validate a study spec; errors are one line naming the file, line and key."""
    document = read_yaml(Path(path))
    if not isinstance(document.data, dict):
        raise ConfigError(
            f"{document.path}: a study spec is a mapping with keys such as name, models, data, "
            "methods (see docs/studies.md)"
        )
    try:
        return StudySpec.model_validate(document.data)
    except ValidationError as error:
        raise ConfigError(describe_error(document, error)) from None


def describe_error(document: YamlDocument, error: ValidationError) -> str:
    """The first validation error as `FILE line N, KEY: message (and k more)`."""
    errors = error.errors()
    first = errors[0]
    loc = first["loc"]
    line, key = document.locate(loc)
    kind = first["type"]
    if kind == "missing":
        message = f"required key {loc[-1]!r} is missing"
    elif kind == "extra_forbidden":
        owner = StudySpec if len(loc) == 1 else _KNOWN_KEYS.get(str(loc[0]))
        known = f"; known keys: {', '.join(owner.model_fields)}" if owner else ""
        message = f"unknown key {loc[-1]!r}{known}"
    elif kind == "value_error":
        message = str(first["ctx"]["error"])
    else:
        message = f"{first['msg'][0].lower()}{first['msg'][1:]}, got {first['input']!r}"
    where = f"{document.path} line {line}" + (f", {key}" if key else "")
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{where}: {message}{more}"
