"""`sequential`: one adapter keeps training, stage after stage (the forgetting baseline), on
every objective: the plain hooks of `Strategy`."""

from __future__ import annotations

from dataclasses import dataclass

from adaptlab.continual.registry import StrategyEntry, register_strategy
from adaptlab.continual.strategy import Strategy, StrategyConfig


@dataclass(frozen=True)
class SequentialConfig(StrategyConfig):
    """Keep fine-tuning one adapter (no options)."""

    name = "sequential"


register_strategy(
    StrategyEntry(
        "sequential",
        SequentialConfig,
        "keep fine-tuning (the baseline)",
        runs_on={
            "classification": Strategy,
            "causal-lm": Strategy,
            "sft": Strategy,
            "chat": Strategy,
        },
    )
)
