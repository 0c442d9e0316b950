"""What a continual strategy is: a config of options and an object whose hooks change how a
sequence trains, on whichever objective it declares (`registry` holds the strategies by name and
what each runs on).

A strategy chooses the adapter each stage trains, may add earlier examples to a batch
(`replayed`), add a term to the loss (`penalty`, given what the stage's forward pass gave: every
head's scores and, when the strategy asks with `hidden_states`, the student's hidden states on a
classification stage; the LM head's input on a causal-LM stage), look at the trained stage
(`end`), and route evaluation to a stage's adapter (`route`). Every strategy combines with any
adaptation method: the method makes the adapter, the strategy decides what it learns from.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from adaptlab.errors import ConfigError

if TYPE_CHECKING:  # a sequence's spec reads strategy configs without torch
    import torch
    from torch import nn

    from adaptlab.continual.stages import Row, StageInTraining

RunT = TypeVar("RunT", bound="StageInTraining[Any]", contravariant=True)
OutputsT = TypeVar("OutputsT", contravariant=True)

SEQUENCE_ADAPTER = "sequence"
"""The adapter every stage trains, for strategies that keep one."""


@dataclass(frozen=True)
class StrategyConfig:
    """A strategy's options; subclasses are frozen dataclasses validated on construction,
    each field an option and its default the option's default."""

    name: ClassVar[str]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class Strategy(Generic[RunT, OutputsT]):
    """Plain sequential training: one adapter keeps learning, stage after stage (the
    forgetting baseline), on any objective. Subclasses override the hooks they need.

    The hooks get the stage in training (`RunT`: a `StageInTraining`) and the penalty what the
    stage's forward pass gave (`OutputsT`). A strategy that reads only what every stage has is
    a `Strategy[StageInTraining[Any], Any]` and runs on every objective; one that reads what one
    objective's stages have (a head per stage, the LM head's input) names that stage and those
    outputs (`Strategy[StageRun, HeadOutputs]`) and is declared for that objective only."""

    hidden_states: ClassVar[bool] = False
    """Whether `penalty` needs the student's hidden states (the model then returns them)."""

    def __init__(self, config: StrategyConfig) -> None:
        self.config = config

    def adapter_name(self, stage: int) -> str:
        """The adapter stage `stage` trains (added the first time a name comes up)."""
        return SEQUENCE_ADAPTER

    def begin(self, run: RunT) -> None:
        """Called once before stage `run.index` trains, its own parts (a head) readied."""

    def replayed(self, run: RunT, new_rows: int, generator: torch.Generator) -> list[Row]:
        """Earlier stages' examples to add to a batch of `new_rows` examples of this stage."""
        return []

    def penalty(self, run: RunT, rows: Sequence[Row], outputs: OutputsT) -> torch.Tensor | None:
        """A term added to the batch's loss; `outputs` what the stage's forward pass gave for
        every row (`StageInTraining.forward`)."""
        return None

    def end(self, run: RunT) -> None:
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
