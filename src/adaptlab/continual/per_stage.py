"""`adapter-per-stage`: a new named adapter for every stage, earlier ones frozen, and the test
of stage j routed to stage j's adapter (task-id routing; Jin et al. 2022's adapter baseline),
on every objective.

Earlier stages keep their scores exactly: nothing of theirs trains again (their adapter and
their head are frozen, the base model is never trained by an adapter method).
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import nn

from adaptlab.continual.registry import StrategyEntry, register_strategy
from adaptlab.continual.strategy import Strategy, StrategyConfig
from adaptlab.methods.adapt import set_active


@dataclass(frozen=True)
class AdapterPerStageConfig(StrategyConfig):
    """One adapter per stage (no options)."""

    name = "adapter-per-stage"


class AdapterPerStage(Strategy):
    """Train stage k's own adapter `stage-k`; test stage j with `stage-j` (a later stage with
    the last one trained)."""

    def adapter_name(self, stage: int) -> str:
        return stage_adapter(stage)

    def route(self, model: nn.Module, stage: int, trained: int) -> None:
        set_active(model, stage_adapter(min(stage, trained)))


def stage_adapter(stage: int) -> str:
    """The name of stage `stage`'s own adapter."""
    return f"stage-{stage}"


register_strategy(
    StrategyEntry(
        "adapter-per-stage",
        AdapterPerStageConfig,
        "a new adapter per stage, earlier ones frozen; routed by stage at test time",
        runs_on={
            "classification": AdapterPerStage,
            "causal-lm": AdapterPerStage,
            "sft": AdapterPerStage,
            "chat": AdapterPerStage,
        },
    )
)
