"""A classification stage in training (`StageRun`): its encoded data set (`StageData`), the loss
of a batch with every row scored by its own stage's head, what the forward pass gives a
strategy's penalty (every head's scores, and the student's hidden states when the strategy asks:
`HeadOutputs`), and the dev accuracy that picks the stage's best epoch."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from adaptlab.continual.heads import StageHeads
from adaptlab.continual.stages import Row, RunningStage
from adaptlab.data.encoding import TextEncoder
from adaptlab.engine.objective import DevScore
from adaptlab.runs.evaluation import evaluate
from adaptlab.tasks.single_label import SINGLE_LABEL


@dataclass(frozen=True)
class StageData:
    """One stage's data set, encoded: its name, label names and features per split."""

    name: str
    label_names: tuple[str, ...]
    encoder: TextEncoder
    train: Sequence[dict[str, Any]]
    dev: Sequence[dict[str, Any]]
    test: Sequence[dict[str, Any]]


@dataclass(frozen=True)
class HiddenStates:
    """The student's hidden states for one batch: a (rows, tokens, width) tensor per layer,
    the embedding output first (as transformers returns them), and the batch's attention mask."""

    layers: tuple[torch.Tensor, ...]
    mask: torch.Tensor


@dataclass(frozen=True)
class HeadOutputs:
    """What a classification stage's forward pass gives a strategy's penalty: `scores[k]`, head
    k's scores for every row of the batch (the heads of the stages so far), and the student's
    hidden states when the strategy asks for them (`Strategy.hidden_states`)."""

    scores: Sequence[torch.Tensor]
    hidden: HiddenStates | None = None


@dataclass(frozen=True)
class StageRun(RunningStage[StageData]):
    """Stage `index` about to be trained on every stage's data: the model with its `heads`,
    and the sequence's `seed`."""

    heads: StageHeads
    seed: int

    @property
    def metric(self) -> str:
        return SINGLE_LABEL.primary_metric

    def forward(self, rows: Sequence[Row], hidden_states: bool) -> tuple[torch.Tensor, HeadOutputs]:
        """Mean cross-entropy of every row under its own stage's head; every head's scores."""
        device = next(self.model.parameters()).device
        features = [self.stages[stage].train[index] for stage, index in rows]
        batch = {k: v.to(device) for k, v in self.stage.encoder.collate(features).items()}
        labels = batch.pop("labels")
        outputs = self._outputs(batch, hidden_states)
        of_stage = torch.tensor([stage for stage, _ in rows], device=device)
        total = outputs.scores[0].new_zeros(())
        for stage in sorted({stage for stage, _ in rows}):
            mask = of_stage == stage
            scores = outputs.scores[stage][mask]
            total = total + F.cross_entropy(scores, labels[mask], reduction="sum")
        return total / len(rows), outputs

    def _outputs(self, batch: dict[str, torch.Tensor], hidden_states: bool) -> HeadOutputs:
        """Every head's output for the batch, and the hidden states when asked."""
        heads = self.heads
        heads.collecting = True
        try:
            if not hidden_states:
                self.model(**batch)
                return HeadOutputs(heads.outputs)
            states = self.model(**batch, output_hidden_states=True).hidden_states
            return HeadOutputs(heads.outputs, HiddenStates(tuple(states), batch["attention_mask"]))
        finally:
            heads.collecting, heads.outputs = False, []

    def loss_terms(self, rows: Sequence[Row]) -> int:
        """The rows: the loss is the mean over them."""
        return len(rows)

    def dev(self) -> DevScore:
        stage = self.stage
        self.heads.select(self.index)
        tested = evaluate(
            self.model,
            stage.encoder,
            stage.dev,
            "single_label",
            stage.label_names,
            self.eval_batch_size,
        )
        return DevScore(tested.loss, tested.metrics, tested.metrics[self.metric])
