"""What a continual strategy is: a config of options and an object whose hooks change how a
classification sequence trains (`lm_strategy.TextStrategy` holds the hooks of a causal-LM
sequence; `registry` the strategies by name and the objectives each runs on).

A strategy chooses the adapter each stage trains, may add earlier examples to a batch
(`replayed`), add a term to the loss (`penalty`, given the student's hidden states when the
strategy asks for them with `hidden_states`), look at the trained stage (`end`), and route
evaluation to a stage's adapter (`route`). Every strategy combines with any adaptation
method: the method makes the adapter, the strategy decides what it learns from.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Literal, get_args

from adaptlab.errors import ConfigError

if TYPE_CHECKING:  # a sequence's spec reads strategy configs without torch
    import torch
    from torch import nn

    from adaptlab.train.continual.stages import HiddenStates, Row, StageRun

Objective = Literal["classification", "causal-lm"]
"""What a sequence's stages train for; a strategy declares the objectives it runs on."""
OBJECTIVES: tuple[Objective, ...] = get_args(Objective)

SEQUENCE_ADAPTER = "sequence"
"""The adapter every stage trains, for strategies that keep one."""


@dataclass(frozen=True)
class StrategyConfig:
    """A strategy's options; subclasses are frozen dataclasses validated on construction,
    each field an option and its default the option's default."""

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
        """Take back what `state` gave, when a sequence resumes on `model` (here: nothing)."""
        if tensors:
            raise ConfigError(
                f"{self.config.name}: the saved strategy state holds {min(tensors)!r}, but "
                "this strategy keeps no tensors"
            )

    def route(self, model: nn.Module, stage: int, trained: int) -> None:
        """Make the model ready to be tested on stage `stage` after stage `trained`."""


def check_number(strategy: str, option: str, value: float, *, positive: bool = False) -> None:
    """`value` must be finite and >= 0 (> 0 with `positive`): one line naming it otherwise."""
    if not (math.isfinite(value) and (value > 0 if positive else value >= 0)):
        bound = "> 0" if positive else ">= 0"
        raise ConfigError(f"{strategy}: {option} must be {bound}, got {value!r}")
