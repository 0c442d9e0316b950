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
    harness: {tasks: [arc_easy]}    # optional: lm-evaluation-harness scores of each trained LM
    forgetting: {limit: 100}        # optional: each causal LM's forgetting on source probes
    metric: macro_f1                # optional: what judges methods (default: fits the data)
    device: auto                    # the best device here (cuda, mps, cpu), or one named
    precision: auto                 # bf16 on a GPU that has it, else fp32; or fp32, bf16, fp16
    quantize: nf4                   # optional: a 4-bit (nf4) or 8-bit (int8) frozen base
                                    # (precision and quantize: a list crosses them with the grid)
    gradient_checkpointing: true    # optional: recompute each layer in the backward pass
    report_to: [tensorboard, mlflow]  # optional: experiment trackers (default none)
    resources: {cpus: 1, gpus: 0.25, max_retries: 3}   # per run, for the Ray executor

A sequence study gives `sequence:` (stages in training order) and `strategies:` instead of
`data:`; its grid is models x methods x strategies x train sizes x seeds x learning rates.

The entries of each key are models beside this one: methods (`spec_methods`), data
(`spec_data`), sources and zero-shot targets (`spec_transfer`), a sequence's stages and
strategies (`spec_sequences`). docs/studies.md documents every key.
"""

from __future__ import annotations

import itertools
import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    Field,
    PositiveInt,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from adaptlab.analysis.tokens import DEFAULT_TOKENS
from adaptlab.continual.metrics import LOWER_IS_BETTER
from adaptlab.continual.objectives import DEFAULT_OBJECTIVE, is_default_objective
from adaptlab.errors import ConfigError
from adaptlab.records.scale import Scale
from adaptlab.study.analysis import AnalysisName, check_analysis
from adaptlab.study.forgetting import ForgettingOptions, check_forgetting
from adaptlab.study.harness import HarnessOptions, check_harness
from adaptlab.study.spec_data import DataEntry, DataOptions
from adaptlab.study.spec_errors import describe_error
from adaptlab.study.spec_fields import (
    DEFAULT,
    SPEC_FOLDER,
    Betas,
    LearningRates,
    ReportTo,
    Seed,
    StrictModel,
    refuse_repeated_labels,
    refuse_repeats,
)
from adaptlab.study.spec_generative import computed_metrics, generative_task
from adaptlab.study.spec_methods import MethodEntry, check_spanning
from adaptlab.study.spec_resources import Resources
from adaptlab.study.spec_scale import SCALE_AXES, Precisions, Quantizations
from adaptlab.study.spec_sequences import (
    ObjectiveName,
    StrategyEntry,
    check_stage,
    check_stage_options,
    check_strategies,
)
from adaptlab.study.spec_transfer import SourceEntry, ZeroShotEntry
from adaptlab.study.yamlfile import read_yaml
from adaptlab.tasks.registry import get_task, known_metrics, task_names


class StudySpec(StrictModel):
    """A study: the grid models x data x train sizes x scales x methods x learning rates x
    seeds, the scales those of the `precision` and `quantize` values listed."""

    name: str
    description: str = ""
    models: Annotated[list[Annotated[str, Field(min_length=1)]], Field(min_length=1)]
    data: list[DataEntry] = []
    objective: ObjectiveName = DEFAULT_OBJECTIVE
    sequence: list[DataEntry] = []
    methods: Annotated[list[MethodEntry], Field(min_length=1)]
    strategies: list[StrategyEntry] = []
    train_sizes: Annotated[list[PositiveInt | None], Field(min_length=1)] = [None]
    seeds: Annotated[list[Seed], Field(min_length=1)] = [0]
    learning_rates: LearningRates = DEFAULT
    betas: Betas = ()
    epochs: PositiveInt = 10
    batch_size: PositiveInt = 16
    max_length: Annotated[int, Field(ge=2)] = 128
    device: str = "auto"
    precision: Precisions = ("auto",)
    base_dtype: Literal["fp32", "bf16", "fp16"] = "fp32"
    quantize: Quantizations = (None,)
    gradient_checkpointing: bool = False
    offload_activations: bool = False
    resources: Resources = Resources()
    report_to: ReportTo = ()
    analysis: list[AnalysisName] = []
    analysis_tokens: Annotated[int, Field(ge=3)] = DEFAULT_TOKENS
    sources: list[SourceEntry] = []
    zero_shot: list[ZeroShotEntry] = []
    metric: str | None = None
    test_size: PositiveInt | None = None
    single_stage: bool = False
    harness: HarnessOptions | None = None
    forgetting: ForgettingOptions | None = None

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
        refuse_repeats(entry.source for entry in values)
        objective = info.data.get("objective")
        for entry in values:
            check_stage_options(entry, objective)
        if objective is not None:  # absent: it was refused
            for entry in values:
                check_stage(entry, objective)
        return values

    @field_validator("strategies", "single_stage")
    @classmethod
    def _needs_sequence(cls, value: object, info: ValidationInfo) -> object:
        if value and info.data.get("sequence") == []:  # absent (not: given and invalid)
            raise ValueError(f"{info.field_name} is for a sequence study; it needs sequence:")
        return value

    @field_validator("analysis", "sources", "zero_shot", "metric", "harness")
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

    @field_validator("analysis")
    @classmethod
    def _analysis_fits_data(cls, value: list[str], info: ValidationInfo) -> list[str]:
        check_analysis(value, info.data.get("data") or [])
        return value

    @field_validator("strategies")
    @classmethod
    def _distinct_strategies(
        cls, values: list[StrategyEntry], info: ValidationInfo
    ) -> list[StrategyEntry]:
        objective = info.data.get("objective")
        if objective is not None:  # absent: it was refused
            check_strategies(values, objective)
        refuse_repeated_labels("strategies", [entry.display_label for entry in values])
        return values

    @property
    def scales(self) -> list[Scale]:
        """How the runs of the study use their hardware: one scale per precision and
        quantisation listed, precision outermost ("auto" precision resolved per run)."""
        return [
            Scale(
                precision,
                self.base_dtype,
                self.gradient_checkpointing,
                self.offload_activations,
                quantize,
            )
            for precision, quantize in itertools.product(self.precision, self.quantize)
        ]

    @property
    def scale_axes(self) -> tuple[str, ...]:
        """The scale keys the study varies: those listing more than one value."""
        return tuple(axis for axis in SCALE_AXES if len(getattr(self, axis)) > 1)

    @model_validator(mode="after")
    def _valid_scales(self) -> StudySpec:
        try:
            self.scales  # noqa: B018 (validates each combination)
        except ConfigError as error:
            raise ValueError(str(error)) from None
        return self

    @model_validator(mode="after")
    def _data_or_sequence(self) -> StudySpec:
        if not self.data and not self.sequence:
            raise ValueError(
                "required key 'data' is missing (or 'sequence', for stages trained in order)"
            )
        if self.sequence and not self.strategies:
            raise ValueError("sequence: needs strategies:, e.g. strategies: [sequential, replay]")
        if not is_default_objective(self.objective) and not self.sequence:
            raise ValueError("objective is for a sequence study; it needs sequence:")
        if self.sequence:
            for entry in self.methods:
                if entry.references or entry.is_fusion or entry.spans_data:
                    raise ValueError(
                        f"method {entry.display_label}: a sequence trains its own adapters; "
                        "fusion, stack:, combine: and multi_task: are not for sequences"
                    )
        return self

    @model_validator(mode="after")
    def _betas_for_preferences(self) -> StudySpec:
        """`betas` crosses the grid of preference data entries that do not set their own."""
        if not self.betas:
            return self
        for entry in self.data:
            options = entry.options.as_kwargs()
            task = options.get("task")
            if task is None or "beta" not in get_task(task).data_options:
                raise ValueError(
                    f"betas: crosses preference tasks' beta; data entry {entry.source} is of "
                    f"task {task or 'a labelled one'}, which has none"
                )
            if "beta" in options:
                raise ValueError(
                    f"data entry {entry.source} sets its own beta; drop it or drop betas:"
                )
        return self

    @model_validator(mode="after")
    def _spanning_data(self) -> StudySpec:
        """Entries over every data set (combine, across-data fusion, multi-task) are sound."""
        if self.sequence:
            return self
        spanning = [entry for entry in self.methods if entry.spans_data]
        sources = [source.label for source in self.sources]
        check_spanning(self.methods, len(self.data), self.learning_rates, sources)
        if spanning and self.zero_shot:
            raise ValueError(
                "zero_shot: scores a trained run on other data sets; a study with combine:, "
                "across_data: or multi_task: entries takes none"
            )
        scoring = [e for e in spanning if e.combine is not None or e.multi_task]
        frozen = [s.frozen_base for s in self.scales if s.frozen_base is not None]
        if scoring and frozen:
            raise ValueError(
                f"method {scoring[0].display_label} scores adapters on a float32 base; it cannot "
                f"with a {frozen[0]} base (quantize:, base_dtype:)"
            )
        return self

    @field_validator("metric")
    @classmethod
    def _metric(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is None:
            return None
        known = judging_metrics()
        if value not in known:
            lower = ", ".join(sorted(LOWER_IS_BETTER))
            raise ValueError(
                f"metric must be one a task judges by, where higher is better (lower for "
                f"{lower}): {', '.join(known)}; got {value!r}"
            )
        for entry in info.data.get("data") or []:
            task = generative_task(entry.options.task)
            if task is not None and value not in computed_metrics(task):
                raise ValueError(
                    f"task {task.name} of data {entry.source} does not compute {value}; pick "
                    f"one it does: {', '.join(computed_metrics(task))}"
                )
        return value

    @field_validator("forgetting")
    @classmethod
    def _forgetting(
        cls, value: ForgettingOptions | None, info: ValidationInfo
    ) -> ForgettingOptions | None:
        if value is not None:
            check_forgetting(info.data.get("data", []))
        return value

    @field_validator("harness")
    @classmethod
    def _harness(cls, value: HarnessOptions | None, info: ValidationInfo) -> HarnessOptions | None:
        if value is not None and not info.data.get("sequence"):
            folder = (info.context or {}).get(SPEC_FOLDER)
            check_harness(value, folder, info.data.get("models", []), info.data.get("data", []))
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
        if not re.fullmatch(r"auto|cpu|mps|cuda(:[0-9]+)?", value):
            raise ValueError(f"device must be auto, cpu, cuda, cuda:N or mps, got {value!r}")
        return value

    @field_validator("models", "train_sizes", "seeds", "analysis")
    @classmethod
    def _distinct(cls, values: list[Any]) -> list[Any]:
        refuse_repeats(values)
        return values

    @field_validator("data")
    @classmethod
    def _distinct_data(cls, values: list[DataEntry]) -> list[DataEntry]:
        refuse_repeats(entry.source for entry in values)
        return values

    @model_validator(mode="after")
    def _labels_name_one_thing(self) -> StudySpec:
        sources = [source.label for source in self.sources]
        refuse_repeats(sources)
        methods = {entry.display_label for entry in self.methods}
        for label in sources:
            if label in methods:
                raise ValueError(f"{label!r} labels both a source and a method; rename one")
        return self

    @field_validator("methods")
    @classmethod
    def _distinct_labels(cls, values: list[MethodEntry]) -> list[MethodEntry]:
        refuse_repeated_labels("methods", [entry.display_label for entry in values])
        return values


def judging_metrics() -> list[str]:
    """Every metric a study may judge by: those tasks compute where higher is better, and each
    task's primary metric (perplexity, where lower is)."""
    primary = (get_task(name).primary_metric for name in task_names())
    return list(dict.fromkeys([*known_metrics(), *primary]))


_SECTIONS: dict[str, type[BaseModel]] = {
    "methods": MethodEntry,
    "sources": SourceEntry,
    "data": DataOptions,
    "sequence": DataOptions,
    "strategies": StrategyEntry,
    "resources": Resources,
    "zero_shot": ZeroShotEntry,
    "harness": HarnessOptions,
    "forgetting": ForgettingOptions,
}
"""The model of each top-level key's entries, whose keys an unknown-key error lists."""


def load_spec(path: str | Path) -> StudySpec:
    """Read and validate a study spec; errors are one line naming the file, line and key."""
    document = read_yaml(Path(path))
    if not isinstance(document.data, dict):
        raise ConfigError(
            f"{document.path}: a study spec is a mapping with keys such as name, models, data, "
            "methods (see docs/studies.md)"
        )
    try:
        folder = document.path.resolve().parent  # relative paths are read from here
        return StudySpec.model_validate(document.data, context={SPEC_FOLDER: folder})
    except ValidationError as error:
        raise ConfigError(describe_error(document, error, StudySpec, _SECTIONS)) from None
