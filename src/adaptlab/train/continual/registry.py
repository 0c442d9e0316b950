"""The continual strategies by name. Each strategy's module registers one `StrategyEntry`
that declares what the strategy supports: how it runs on each objective it takes (its
classification and causal-LM behaviour), its options (its config's fields, with their
defaults) and a one-line description. Which strategies an objective takes, the refusals
and the command's help are all computed from these entries."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

from adaptlab.errors import ConfigError
from adaptlab.registry import Registry
from adaptlab.train.continual.strategy import OBJECTIVES, Objective, StrategyConfig

if TYPE_CHECKING:  # the registry loads no torch: records read strategy configs by name
    from adaptlab.train.continual.lm_strategy import TextStrategy
    from adaptlab.train.continual.strategy import Strategy


@dataclass(frozen=True)
class StrategyEntry:
    """A registered strategy: its name, config class, a one-line description, and its
    behaviour on each objective it supports (None where it does not run)."""

    name: str
    config_class: type[StrategyConfig]
    description: str
    classification: Callable[[Any], Strategy] | None = None
    """Makes the strategy of a classification sequence from a validated config."""
    causal_lm: Callable[[Any], TextStrategy] | None = None
    """Makes the strategy of a causal-LM sequence from a validated config."""

    def __post_init__(self) -> None:
        if not self.objectives:
            raise ValueError(f"strategy {self.name!r} runs on no objective")

    @property
    def objectives(self) -> tuple[Objective, ...]:
        """The objectives the strategy runs on, in `OBJECTIVES` order."""
        behaviours = {"classification": self.classification, "causal-lm": self.causal_lm}
        return tuple(o for o in OBJECTIVES if behaviours[o] is not None)

    @property
    def options(self) -> dict[str, Any]:
        """Each option (a field of the config) with its default."""
        return {option.name: option.default for option in fields(self.config_class)}


STRATEGIES: Registry[StrategyEntry] = Registry(
    "strategy",
    "strategies",
    builtin={
        "sequential": "adaptlab.train.continual.sequential",
        "kd-logit": "adaptlab.train.continual.distillation",
        "ewc": "adaptlab.train.continual.ewc",
        "adapter-per-stage": "adaptlab.train.continual.per_stage",
        "replay": "adaptlab.train.continual.replay",
        "kd-representation": "adaptlab.train.continual.representation_distillation",
        "kd-contrastive": "adaptlab.train.continual.representation_distillation",
    },
)
"""Every strategy by name; adaptlab's own (listed first, in this order) are registered by
their modules, imported when a strategy is first looked up."""


def register_strategy(entry: StrategyEntry) -> StrategyEntry:
    """Add `entry` to the registry under its name."""
    return STRATEGIES.register(entry)


def list_strategies() -> list[StrategyEntry]:
    """Every strategy: adaptlab's own in listing order, then any registered from outside."""
    return list(STRATEGIES)


def strategies_for(objective: str) -> list[str]:
    """The names of the strategies that run on `objective`, in listing order."""
    return STRATEGIES.names(where=lambda entry: objective in entry.objectives)


def check_objective(name: str, objective: str) -> None:
    """Strategy `name` must run on `objective`: one line naming those that do otherwise."""
    entry = STRATEGIES.get(name)
    if objective not in entry.objectives:
        raise _refusal(entry, objective)


def _refusal(entry: StrategyEntry, objective: str) -> ConfigError:
    return ConfigError(
        f"strategy {entry.name} is for {' and '.join(entry.objectives)} sequences; a "
        f"{objective} sequence takes {', '.join(strategies_for(objective))}"
    )


def strategy_config(name: str, options: Mapping[str, Any] | None = None) -> StrategyConfig:
    """`name`'s validated config from plain options; one-line errors for unknown names,
    unknown options and values of the wrong type."""
    entry = STRATEGIES.get(name)
    known = {f.name: f for f in fields(entry.config_class)}
    values: dict[str, Any] = {}
    for option, value in (options or {}).items():
        if option not in known:
            listed = ", ".join(known) or "none"
            raise ConfigError(f"{name}: unknown option {option!r}; options: {listed}")
        wanted = type(known[option].default)
        if wanted is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if type(value) is not wanted:
            article = "an" if wanted.__name__[0] in "aeiou" else "a"
            raise ConfigError(
                f"{name}: {option} must be {article} {wanted.__name__}, got {value!r}"
            )
        values[option] = value
    return entry.config_class(**values)


def make_strategy(config: StrategyConfig) -> Strategy:
    """The classification strategy of a validated config."""
    entry = STRATEGIES.get(config.name)
    if entry.classification is None:
        raise _refusal(entry, "classification")
    return entry.classification(config)


def make_text_strategy(config: StrategyConfig) -> TextStrategy:
    """The causal-LM strategy of a validated config."""
    entry = STRATEGIES.get(config.name)
    if entry.causal_lm is None:
        raise _refusal(entry, "causal-lm")
    return entry.causal_lm(config)
