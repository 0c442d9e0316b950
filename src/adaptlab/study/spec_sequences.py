"""What a sequence study adds to the spec: its stages (checked against its objective where
their task is known before loading) and the continual strategies it compares (each must run on
its objective)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

from pydantic import AfterValidator, Field, PlainValidator, model_validator

from adaptlab.continual.objectives import (
    check_objective_name,
    get_objective,
    refuse_unread_by_objective,
)
from adaptlab.continual.registry import check_objective, strategy_config
from adaptlab.continual.sequence_objective import NOT_IN_A_SEQUENCE
from adaptlab.continual.strategy import StrategyConfig
from adaptlab.data.builtin import BUILTINS
from adaptlab.errors import AdaptlabError, ConfigError
from adaptlab.study.spec_data import DataEntry
from adaptlab.study.spec_fields import StrictModel, options_label
from adaptlab.study.spec_generative import run_options
from adaptlab.tasks.generative_settings import GENERATIVE_OPTIONS


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


def _objective(value: str) -> str:
    """A study's `objective:` must name an objective."""
    try:
        check_objective_name(value)
    except ConfigError as error:
        raise ValueError(str(error)) from None
    return value


ObjectiveName = Annotated[str, AfterValidator(_objective)]


class StrategyEntry(StrictModel):
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
        return self.label or name + options_label(options)

    def config(self) -> StrategyConfig:
        """The validated strategy config."""
        return strategy_config(*self.strategy)


def check_stage_options(entry: DataEntry, objective: str | None) -> None:
    """A stage's data options, as its sequence reads them when it runs: generative ones only
    for an objective whose stages take them (sft, chat), none that no sequence takes
    (`NOT_IN_A_SEQUENCE`), and none the objective's stages do not read
    (`refuse_unread_by_objective`, as `adaptlab sequence` refuses them)."""
    options = entry.options.as_kwargs()
    given = [key for key in GENERATIVE_OPTIONS if key in options]
    if given and (objective is None or not get_objective(objective).generation_options):
        raise ValueError(
            f"stage {entry.source}: a sequence reads its stages as its objective does; "
            f"drop {given[0]}"
        )
    for key in given:  # their values were checked with the entry (`check_entry`)
        if key in NOT_IN_A_SEQUENCE:
            raise ValueError(
                f"stage {entry.source} takes no {key} ({NOT_IN_A_SEQUENCE[key]}); drop it"
            )
    if objective is not None:
        try:
            refuse_unread_by_objective(options, objective)
        except ConfigError as error:
            raise ValueError(f"stage {entry.source}: {error}") from None


def stage_run_options(entry: DataEntry, objective: str, base: Path) -> dict[str, Any]:
    """A stage's options as its sequence's spec keeps them: an sft or chat stage's generative
    options as a run keeps them (`run_options`: defaults left out, the chat template an absolute
    path read from `base`), the task left out where the stage did not name it."""
    options = entry.options.as_kwargs()
    if not get_objective(objective).generation_options:
        return options
    kept = run_options({**options, "task": objective}, base)
    if "task" not in options:
        del kept["task"]
    return kept


def check_stage(entry: DataEntry, objective: str) -> None:
    """A stage's data must be of a task `objective` trains on, where that task is known
    before loading."""
    builtin = BUILTINS.get(entry.source)
    task = builtin.task if builtin is not None else entry.options.task
    if task is not None:
        try:
            get_objective(objective).check_stage_task(entry.source, task)
        except AdaptlabError as error:
            raise ValueError(str(error)) from None


def check_strategies(entries: Sequence[StrategyEntry], objective: str) -> None:
    """A study of `objective` takes only the strategies that declare that objective."""
    for entry in entries:
        try:
            check_objective(entry.strategy[0], objective, f"objective: {objective}")
        except ConfigError as error:
            raise ValueError(str(error)) from None
