"""`replay`: earlier stages' training examples join each batch at a fixed rate (experience
replay, as in Jin et al. 2022's lifelong pretraining; default rate 1%).

With rate r, the first n examples of a stage are joined by floor(r * n) earlier examples in
all: a batch of b new examples gets floor(r * (n + b)) - floor(r * n) of them, so the rate
holds exactly over a stage and the replayed examples are spread evenly over its batches. They
are drawn uniformly, with replacement, from the training examples of every earlier stage, and
each is scored by its own stage's head. On a causal-LM sequence the same rule mixes earlier
corpora's training documents into each batch, on an sft or chat sequence earlier stages'
training examples, each with the loss on its own answer.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

from adaptlab.continual.registry import StrategyEntry, register_strategy
from adaptlab.continual.stages import Row, StageInTraining
from adaptlab.continual.strategy import Strategy, StrategyConfig
from adaptlab.errors import ConfigError


@dataclass(frozen=True)
class ReplayConfig(StrategyConfig):
    """`rate`: earlier examples per new example (0.01 = one in a hundred)."""

    name = "replay"
    rate: float = 0.01

    def __post_init__(self) -> None:
        if not (math.isfinite(self.rate) and 0 < self.rate <= 1):
            raise ConfigError(f"replay: rate must be in (0, 1], got {self.rate!r}")


class Replay(Strategy[StageInTraining[Any], Any]):
    """Mix earlier stages' examples (or documents) into every stage's batches."""

    config: ReplayConfig

    def __init__(self, config: ReplayConfig) -> None:
        super().__init__(config)
        self._seen = 0

    def begin(self, run: StageInTraining[Any]) -> None:
        self._seen = 0

    def replayed(
        self, run: StageInTraining[Any], new_rows: int, generator: torch.Generator
    ) -> list[Row]:
        sizes = [len(stage.train) for stage in run.stages[: run.index]]
        rows = replay_rows(self.config.rate, self._seen, new_rows, sizes, generator)
        self._seen += new_rows
        return rows


def replay_rows(
    rate: float, seen: int, new_rows: int, sizes: list[int], generator: torch.Generator
) -> list[Row]:
    """The earlier examples due with `new_rows` new ones after `seen` (the module's rule),
    drawn uniformly with replacement from earlier stages of `sizes` training examples."""
    due = math.floor(rate * (seen + new_rows)) - math.floor(rate * seen)
    total = sum(sizes)
    if due == 0 or total == 0:
        return []
    picks = torch.randint(total, (due,), generator=generator).tolist()
    return [_locate(pick, sizes) for pick in picks]


def _locate(position: int, sizes: list[int]) -> Row:
    """(stage, index) of the `position`-th example of the stages' training sets laid end to end."""
    for stage, size in enumerate(sizes):
        if position < size:
            return stage, position
        position -= size
    raise IndexError(position)


register_strategy(
    StrategyEntry(
        "replay",
        ReplayConfig,
        "earlier stages' examples join each batch",
        runs_on={"classification": Replay, "causal-lm": Replay, "sft": Replay, "chat": Replay},
    )
)
