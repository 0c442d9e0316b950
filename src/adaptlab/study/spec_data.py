"""The data sources a spec names: a built-in name, a file, a folder or hf:NAME, each with the
options that say how to read it (and, for a generative task, how it trains and generates)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from adaptlab.study.spec_fields import SPEC_FOLDER, StrictModel
from adaptlab.study.spec_generative import check_entry, run_options
from adaptlab.tasks.registry import known_task, task_names


class DataOptions(StrictModel):
    """How to read a data file (as `adaptlab train`'s column options; a built-in reads its own
    and refuses them), and a generative or preference task's options (`adaptlab train`'s
    --pack, --max-new-tokens, --beta, ...), which `study.spec_generative` checks as a run
    does."""

    text_column: str | None = None
    text_pair_column: str | None = None
    label_column: str | None = None
    task: str | None = None
    label_separator: str | None = None
    split: Literal["random", "chronological"] | None = None
    time_column: str | None = None
    prompt_column: Any = None
    completion_column: Any = None
    train_on_prompt: Any = None
    chat_template: Any = None
    pack: Any = None
    max_new_tokens: Any = None
    stop: Any = None
    metric: Any = None
    beta: Any = None
    loss: Any = None
    simpo_gamma: Any = None
    precompute_reference: Any = None
    desirable_weight: Any = None
    undesirable_weight: Any = None
    center_rewards_coefficient: Any = None
    reward: Any = None
    format_pattern: Any = None
    num_generations: Any = None
    epsilon: Any = None
    epsilon_high: Any = None
    num_iterations: Any = None
    temperature: Any = None
    scale_rewards: Any = None

    @field_validator("task")
    @classmethod
    def _task(cls, value: str | None) -> str | None:
        if value is not None and not known_task(value):
            raise ValueError(f"unknown task {value!r}; known tasks: {', '.join(task_names())}")
        return value

    def as_kwargs(self) -> dict[str, Any]:
        """The options given, as `load_dataset` keywords."""
        return {k: v for k, v in self.model_dump().items() if v is not None}


class DataEntry(StrictModel):
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

    @model_validator(mode="after")
    def _task_reads_it(self, info: ValidationInfo) -> DataEntry:
        """A generative task's options checked as its run checks them, its chat template file
        read from the spec's folder; the generative options refused without one
        (`study.spec_generative`)."""
        folder = (info.context or {}).get(SPEC_FOLDER)
        check_entry(self.source, self.options.as_kwargs(), folder)
        return self

    def run_options(self, base: Path) -> dict[str, Any]:
        """The options as a run's spec keeps them (paths read from `base`, the spec's
        folder)."""
        return run_options(self.options.as_kwargs(), base)
