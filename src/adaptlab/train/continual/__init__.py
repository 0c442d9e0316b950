"""Continual learning: one model through a sequence of stages, with a strategy against
forgetting, tested on every stage after each (the matrix R and its scores)."""

from typing import TYPE_CHECKING

from adaptlab.lazy import lazy_face

if TYPE_CHECKING:
    import adaptlab.train.continual.distillation as distillation
    import adaptlab.train.continual.ewc as ewc
    import adaptlab.train.continual.per_stage as per_stage
    import adaptlab.train.continual.replay as replay
    import adaptlab.train.continual.representation_distillation as representation_distillation
    from adaptlab.train.continual.heads import StageHeads
    from adaptlab.train.continual.metrics import (
        ContinualScores,
        average_score,
        backward_transfer,
        forgetting,
        forward_transfer,
        gem_forward_transfer,
        summarize,
    )
    from adaptlab.train.continual.registry import (
        StrategyEntry,
        list_strategies,
        make_strategy,
        register_strategy,
        strategy_config,
    )
    from adaptlab.train.continual.result import SequenceResult, StageRecord
    from adaptlab.train.continual.run import SEQUENCE_FILE, run_sequence
    from adaptlab.train.continual.spec import SequenceSpec
    from adaptlab.train.continual.strategy import Strategy, StrategyConfig

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
