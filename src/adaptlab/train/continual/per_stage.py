"""`adapter-per-stage`: a new named adapter for every stage, earlier ones frozen, and the test
of stage j routed to stage j's adapter (task-id routing; Jin et al. 2022's adapter baseline).

Earlier stages keep their scores exactly: nothing of theirs trains again (their adapter and
their head are frozen, the base model is never trained by an adapter method).
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import nn

from adaptlab.methods import set_active
from adaptlab.train.continual.strategy import (
    Strategy,
    StrategyConfig,
    StrategyEntry,
    register_strategy,
)


@dataclass(frozen=True)
class AdapterPerStageConfig(StrategyConfig):
    """One adapter per stage (no options)."""

    name = "adapter-per-stage"


class AdapterPerStage(Strategy):
    """Train stage k's own adapter `stage-k`; test stage j with `stage-j`."""

    def adapter_name(self, stage: int) -> str:
        return f"stage-{stage}"

    def route(self, model: nn.Module, stage: int, trained: int) -> None:
        set_active(model, self.adapter_name(min(stage, trained)))


register_strategy(
    StrategyEntry(
        "adapter-per-stage",
        AdapterPerStageConfig,
        AdapterPerStage,
        "a new adapter per stage, earlier ones frozen; routed by stage at test time",
    )
)
