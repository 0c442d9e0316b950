"""What a sequence study adds to the spec: its stages (checked where their task is known
before loading) and the continual strategies it compares."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any

from pydantic import Field, PlainValidator, model_validator

from adaptlab.data.builtin import BUILTINS
from adaptlab.errors import ConfigError
from adaptlab.study.spec_data import DataEntry
from adaptlab.study.spec_fields import StrictModel, options_label
from adaptlab.train.continual.registry import STRATEGIES, strategies_for, strategy_config
from adaptlab.train.continual.strategy import StrategyConfig


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


def check_stage(entry: DataEntry) -> None:
    """A stage must be single-label classification, where that is known before loading."""
    builtin = BUILTINS.get(entry.source)
    task = builtin.task if builtin is not None else entry.options.task
    if task is not None and task != "single_label":
        raise ValueError(
            f"stage {entry.source} is a {task} task; sequences take single-label "
            "classification stages"
        )


def check_lm_strategies(entries: Sequence[StrategyEntry]) -> None:
    """A causal-LM sequence takes only the strategies that declare that objective."""
    for entry in entries:
        strategy = STRATEGIES.get(entry.strategy[0])
        if "causal-lm" not in strategy.objectives:
            raise ValueError(
                f"strategy {strategy.name} is for {' and '.join(strategy.objectives)} "
                f"sequences; objective: causal-lm takes {', '.join(strategies_for('causal-lm'))}"
            )
