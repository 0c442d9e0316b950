"""Training of one classification stage of a sequence in the epoch loop
(`adaptlab.train.loop`): each example scored by its own stage's head, the strategy's penalty
added, the best epoch chosen by dev accuracy, and the strategy's `end` called once the best
epoch's weights are back."""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F

from adaptlab.tasks.evaluation import evaluate
from adaptlab.tasks.single_label import SINGLE_LABEL
from adaptlab.train.config import TrainConfig
from adaptlab.train.continual.stage_objective import StageObjective
from adaptlab.train.continual.stages import HiddenStates, Row, StageRun
from adaptlab.train.continual.strategy import Strategy
from adaptlab.train.history import TrainHistory
from adaptlab.train.objective import DevScore


class LabelledStage(StageObjective[StageRun, Strategy]):
    """Stage `run.index` of a classification sequence as an `Objective`."""

    metric = SINGLE_LABEL.primary_metric

    def loss(self, rows: list[Row]) -> torch.Tensor:
        """Mean cross-entropy of every row under its own stage's head, plus the strategy's term."""
        run, device = self.run, self.device
        features = [run.stages[stage].train[index] for stage, index in rows]
        batch = {k: v.to(device) for k, v in run.stage.encoder.collate(features).items()}
        labels = batch.pop("labels")
        outputs, hidden = self._forward(batch)
        of_stage = torch.tensor([stage for stage, _ in rows], device=device)
        total = outputs[0].new_zeros(())
        for stage in sorted({stage for stage, _ in rows}):
            mask = of_stage == stage
            total = total + F.cross_entropy(outputs[stage][mask], labels[mask], reduction="sum")
        loss = total / len(rows)
        extra = self.strategy.penalty(run, rows, outputs, hidden)
        return loss if extra is None else loss + extra

    def _forward(
        self, batch: dict[str, torch.Tensor]
    ) -> tuple[Sequence[torch.Tensor], HiddenStates | None]:
        """Every head's output for the batch, and the hidden states when the strategy asks."""
        heads = self.run.heads
        heads.collecting = True
        hidden = None
        try:
            if self.strategy.hidden_states:
                states = self.run.model(**batch, output_hidden_states=True).hidden_states
                hidden = HiddenStates(tuple(states), batch["attention_mask"])
            else:
                self.run.model(**batch)
            return heads.outputs, hidden
        finally:
            heads.collecting, heads.outputs = False, []

    def dev(self) -> DevScore:
        stage = self.run.stage
        self.run.heads.select(self.run.index)
        tested = evaluate(
            self.run.model,
            stage.encoder,
            stage.dev,
            "single_label",
            stage.label_names,
            self.eval_batch_size,
        )
        return DevScore(tested.loss, tested.metrics, tested.metrics[self.metric])


def train_stage(
    run: StageRun,
    strategy: Strategy,
    config: TrainConfig,
    learning_rate: float,
    *,
    progress: bool = True,
) -> TrainHistory:
    """Train the model's trainable tensors on stage `run.index`; keep its best dev epoch."""
    objective = LabelledStage(run, strategy, config.eval_batch_size)
    history = objective.train(config, learning_rate, progress)
    strategy.end(run)
    return history
