"""The continual strategies by name. Each strategy's module registers one `StrategyEntry`
that declares what the strategy supports: the objectives it runs on, each with the strategy
class that runs there (`runs_on`), its options (its config's fields, with their defaults) and a
one-line description. Which strategies an objective takes, the refusals and the command's help
are all computed from these entries."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

from adaptlab.continual.objectives import (
    DEFAULT_OBJECTIVE,
    known_objective,
    objective_names,
)
from adaptlab.continual.strategy import StrategyConfig
from adaptlab.errors import ConfigError
from adaptlab.registry import Registry

if TYPE_CHECKING:  # the registry loads no torch: records read strategy configs by name
    from adaptlab.continual.strategy import Strategy


@dataclass(frozen=True)
class StrategyEntry:
    """A registered strategy: its name, config class, a one-line description, and what it
    runs on: by objective name (`objectives`), what makes the strategy that runs there from a
    validated config (a `Strategy` subclass; the same one where it behaves alike)."""

    name: str
    config_class: type[StrategyConfig]
    description: str
    runs_on: Mapping[str, Callable[[Any], Strategy[Any, Any]]]

    def __post_init__(self) -> None:
        if not self.runs_on:
            raise ValueError(f"strategy {self.name!r} runs on no objective")
        unknown = [name for name in self.runs_on if not known_objective(name)]
        if unknown:
            raise ValueError(
                f"strategy {self.name!r} runs on unknown objectives {unknown}; known: "
                + ", ".join(objective_names())
            )

    @property
    def objectives(self) -> tuple[str, ...]:
        """The objectives the strategy runs on, in the objectives' listing order."""
        return tuple(name for name in objective_names() if name in self.runs_on)

    def behaviour(self, objective: str) -> Callable[[Any], Strategy[Any, Any]] | None:
        """What makes the strategy that runs on `objective`; None where it does not run."""
        return self.runs_on.get(objective)

    @property
    def options(self) -> dict[str, Any]:
        """Each option (a field of the config) with its default."""
        return {option.name: option.default for option in fields(self.config_class)}


STRATEGIES: Registry[StrategyEntry] = Registry(
    "strategy",
    "strategies",
    builtin={
        "sequential": "adaptlab.continual.sequential",
        "kd-logit": "adaptlab.continual.distillation",
        "ewc": "adaptlab.continual.ewc",
        "adapter-per-stage": "adaptlab.continual.per_stage",
        "replay": "adaptlab.continual.replay",
        "kd-representation": "adaptlab.continual.representation_distillation",
        "kd-contrastive": "adaptlab.continual.representation_distillation",
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
    return STRATEGIES.names(where=lambda entry: entry.behaviour(objective) is not None)


def check_objective(name: str, objective: str, sequence: str | None = None) -> None:
    """Strategy `name` must run on `objective`: one line naming those that do otherwise, the
    sequence called `sequence` in it ("a <objective> sequence" unless given)."""
    entry = STRATEGIES.get(name)
    if entry.behaviour(objective) is None:
        raise _refusal(entry, objective, sequence)


def _refusal(entry: StrategyEntry, objective: str, sequence: str | None = None) -> ConfigError:
    return ConfigError(
        f"strategy {entry.name} is for {' and '.join(entry.objectives)} sequences; "
        f"{sequence or f'a {objective} sequence'} takes {', '.join(strategies_for(objective))}"
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


def make_strategy(config: StrategyConfig, objective: str = DEFAULT_OBJECTIVE) -> Strategy[Any, Any]:
    """The strategy of a validated config, for a sequence of `objective`."""
    entry = STRATEGIES.get(config.name)
    behaviour = entry.behaviour(objective)
    if behaviour is None:
        raise _refusal(entry, objective)
    return behaviour(config)
