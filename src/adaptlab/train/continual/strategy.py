"""Continual-learning strategies: small registered objects that change how a sequence trains.

A strategy chooses the adapter each stage trains, may add earlier examples to a batch
(`replayed`), add a term to the loss (`penalty`, given the student's hidden states when the
strategy asks for them with `hidden_states`), look at the trained stage (`end`), and route
evaluation to a stage's adapter (`route`). Every strategy combines with any adaptation
method: the method makes the adapter, the strategy decides what it learns from.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from typing import TYPE_CHECKING, Any, ClassVar

from adaptlab.errors import ConfigError
from adaptlab.registry import Registry

if TYPE_CHECKING:  # a sequence's spec reads strategy configs without torch
    import torch
    from torch import nn

    from adaptlab.train.continual.stages import HiddenStates, Row, StageRun

SEQUENCE_ADAPTER = "sequence"
"""The adapter every stage trains, for strategies that keep one."""


@dataclass(frozen=True)
class StrategyConfig:
    """A strategy's options; subclasses are frozen dataclasses validated on construction."""

    name: ClassVar[str]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class Strategy:
    """Plain sequential training: one adapter keeps learning, stage after stage (the
    forgetting baseline). Subclasses override the hooks they need."""

    hidden_states: ClassVar[bool] = False
    """Whether `penalty` needs the student's hidden states (the model then returns them)."""

    def __init__(self, config: StrategyConfig) -> None:
        self.config = config

    def adapter_name(self, stage: int) -> str:
        """The adapter stage `stage` trains (added the first time a name comes up)."""
        return SEQUENCE_ADAPTER

    def begin(self, run: StageRun) -> None:
        """Called once before stage `run.index` trains, with its head selected."""

    def replayed(self, run: StageRun, new_rows: int, generator: torch.Generator) -> list[Row]:
        """Earlier stages' examples to add to a batch of `new_rows` examples of this stage."""
        return []

    def penalty(
        self,
        run: StageRun,
        rows: Sequence[Row],
        outputs: Sequence[torch.Tensor],
        hidden: HiddenStates | None = None,
    ) -> torch.Tensor | None:
        """A term added to the batch's loss; `outputs[k]` are head k's scores for every row,
        `hidden` the student's hidden states for the batch when `hidden_states` is set."""
        return None

    def end(self, run: StageRun) -> None:
        """Called once after stage `run.index` trained, its best epoch's weights restored."""

    def state(self) -> dict[str, torch.Tensor]:
        """Tensors the strategy carries from one stage to the next, kept with each stage's
        checkpoint (none for most strategies: their state is the model's)."""
        return {}

    def load_state(self, model: nn.Module, tensors: Mapping[str, torch.Tensor]) -> None:
        """Take back what `state` gave, when a sequence resumes on `model`."""

    def route(self, model: nn.Module, stage: int, trained: int) -> None:
        """Make the model ready to be tested on stage `stage` after stage `trained`."""


def check_number(strategy: str, option: str, value: float, *, positive: bool = False) -> None:
    """`value` must be finite and >= 0 (> 0 with `positive`): one line naming it otherwise."""
    if not (math.isfinite(value) and (value > 0 if positive else value >= 0)):
        bound = "> 0" if positive else ">= 0"
        raise ConfigError(f"{strategy}: {option} must be {bound}, got {value!r}")


@dataclass(frozen=True)
class SequentialConfig(StrategyConfig):
    """Keep fine-tuning one adapter (no options)."""

    name = "sequential"


@dataclass(frozen=True)
class StrategyEntry:
    """A registered strategy: its name, config class, constructor and a one-line summary."""

    name: str
    config_class: type[StrategyConfig]
    make: Callable[[Any], Strategy]
    description: str


STRATEGIES: Registry[StrategyEntry] = Registry(
    "strategy",
    "strategies",
    builtin={
        "sequential": "adaptlab.train.continual.strategy",
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
    """The strategy object for a validated config."""
    return STRATEGIES.get(config.name).make(config)


register_strategy(
    StrategyEntry("sequential", SequentialConfig, Strategy, "keep fine-tuning (the baseline)")
)
