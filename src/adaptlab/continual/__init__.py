"""Continual learning: one model through a sequence of stages, with a strategy against
forgetting, tested on every stage after each (the matrix R and its scores)."""

from typing import TYPE_CHECKING

from adaptlab.lazy import lazy_face

if TYPE_CHECKING:
    import adaptlab.continual.distillation as distillation
    import adaptlab.continual.ewc as ewc
    import adaptlab.continual.per_stage as per_stage
    import adaptlab.continual.replay as replay
    import adaptlab.continual.representation_distillation as representation_distillation
    from adaptlab.continual.heads import StageHeads
    from adaptlab.continual.metrics import (
        ContinualScores,
        average_score,
        backward_transfer,
        forgetting,
        forward_transfer,
        gem_forward_transfer,
        summarize,
    )
    from adaptlab.continual.registry import (
        StrategyEntry,
        list_strategies,
        make_strategy,
        register_strategy,
        strategy_config,
    )
    from adaptlab.continual.result import SequenceResult, StageRecord
    from adaptlab.continual.run import SEQUENCE_FILE, run_sequence
    from adaptlab.continual.spec import SequenceSpec
    from adaptlab.continual.strategy import Strategy, StrategyConfig

__all__ = [
    "SEQUENCE_FILE",
    "ContinualScores",
    "SequenceResult",
    "SequenceSpec",
    "StageHeads",
    "StageRecord",
    "Strategy",
    "StrategyConfig",
    "StrategyEntry",
    "average_score",
    "backward_transfer",
    "distillation",
    "ewc",
    "forgetting",
    "forward_transfer",
    "gem_forward_transfer",
    "list_strategies",
    "make_strategy",
    "per_stage",
    "register_strategy",
    "replay",
    "representation_distillation",
    "run_sequence",
    "strategy_config",
    "summarize",
]

lazy_face(__name__)
