"""The hooks of a strategy on a causal-LM sequence (lifelong pretraining, Jin et al. 2022):
every stage a corpus, the model a causal LM. A strategy that runs there declares a subclass
of `TextStrategy` as its causal-LM behaviour where it registers (`registry.StrategyEntry`);
it takes the same validated config as on a classification sequence."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from adaptlab.train.continual.strategy import SEQUENCE_ADAPTER, StrategyConfig

if TYPE_CHECKING:
    import torch
    from torch import nn

    from adaptlab.train.continual.lm_stages import TextStageRun
    from adaptlab.train.continual.stages import Row
    from adaptlab.train.lm_head_capture import LmHeadInput


class TextStrategy:
    """`sequential` on a causal LM: one adapter keeps training on each corpus in turn.
    Subclasses override the hooks they need."""

    def __init__(self, config: StrategyConfig) -> None:
        self.config = config

    def adapter_name(self, stage: int) -> str:
        """The adapter stage `stage` trains (added the first time a name comes up)."""
        return SEQUENCE_ADAPTER

    def begin(self, run: TextStageRun) -> None:
        """Called once before stage `run.index` trains."""

    def replayed(self, run: TextStageRun, new_rows: int, generator: torch.Generator) -> list[Row]:
        """Earlier corpora's documents to add to a batch of `new_rows` documents of this one."""
        return []

    def penalty(
        self, run: TextStageRun, rows: Sequence[Row], head: LmHeadInput
    ) -> torch.Tensor | None:
        """A term added to the batch's loss; `head` what the student's LM head reads for the
        batch (hidden states (rows, tokens, hidden) and the head's weight and bias), from which
        a strategy computes what it needs of the logits a chunk at a time
        (`adaptlab.train.lm_loss`), never all of them at once."""
        return None

    def route(self, model: nn.Module, stage: int, trained: int) -> None:
        """Make the model ready to be tested on corpus `stage` after stage `trained`."""
