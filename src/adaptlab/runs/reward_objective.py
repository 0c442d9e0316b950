"""Training a reward model on preference pairs (`Objective`): a batch holds each pair's two
texts, right-padded to one width, and a step reads them in one forward pass, every chosen
text then every rejected one as TRL's `RewardTrainer` lays them out; the model's one output is
each text's score (a decoder's at its last token that is not padding), and the loss is the mean
Bradley-Terry loss of the pairs (`adaptlab.engine.preference_loss.reward_loss`, TRL's, with its
centring term when asked). A batch is laid out pair by pair, so a data-parallel run cuts it
between pairs, never inside one. Dev is scored each epoch by the pairwise accuracy, the mean
margin and the loss."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn

from adaptlab.data.reward_encoding import ScoredPair
from adaptlab.engine.objective import DevScore, TensorBatch
from adaptlab.engine.preference_loss import reward_loss
from adaptlab.parallel.shared_evaluation import gathered, my_turn
from adaptlab.runs.generative_evaluation import Scored
from adaptlab.tasks.reward import (
    CHOSEN_SCORE,
    PAIRWISE_ACCURACY,
    REJECTED_SCORE,
    REWARD_MARGIN,
)


@dataclass(frozen=True)
class PairScores:
    """The scores of a batch's chosen and rejected texts, (pairs,) each."""

    chosen: torch.Tensor
    rejected: torch.Tensor


def collate_pairs(pairs: Sequence[ScoredPair], pad_id: int) -> TensorBatch:
    """`input_ids` and `attention_mask` of shape (pairs, 2, width): each pair's chosen text then
    its rejected one, right-padded with `pad_id` to the batch's longest text."""
    width = max(max(len(pair.chosen), len(pair.rejected)) for pair in pairs)
    ids = torch.full((len(pairs), 2, width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(pairs), 2, width), dtype=torch.long)
    for row, pair in enumerate(pairs):
        for side, text in enumerate((pair.chosen, pair.rejected)):
            ids[row, side, : len(text)] = torch.tensor(text, dtype=torch.long)
            mask[row, side, : len(text)] = 1
    return {"input_ids": ids, "attention_mask": mask}


def pair_scores(model: nn.Module, batch: TensorBatch) -> PairScores:
    """The model's score of every text of `batch`, read in one forward pass over the chosen
    texts then the rejected ones."""
    ids, mask = batch["input_ids"], batch["attention_mask"]
    rows = torch.cat([ids[:, 0], ids[:, 1]]), torch.cat([mask[:, 0], mask[:, 1]])
    scores = model(input_ids=rows[0], attention_mask=rows[1]).logits.squeeze(-1)
    chosen, rejected = scores.chunk(2)
    return PairScores(chosen, rejected)


class RewardPairs:
    """Train `model`'s score on `train`'s pairs; score each epoch on `dev`'s."""

    title = ""
    metric = PAIRWISE_ACCURACY

    def __init__(
        self,
        model: nn.Module,
        train: Sequence[ScoredPair],
        dev: Sequence[ScoredPair],
        *,
        pad_id: int,
        center_coefficient: float | None,
        eval_batch_size: int,
    ) -> None:
        self.model, self.train_pairs, self.dev_pairs = model, train, dev
        self.pad_id, self.center_coefficient = pad_id, center_coefficient
        self.eval_batch_size = eval_batch_size
        self.device = next(model.parameters()).device

    @property
    def examples(self) -> int:
        return len(self.train_pairs)

    def batch(self, indices: list[int], generator: torch.Generator) -> TensorBatch:
        return self._on_device(collate_pairs([self.train_pairs[i] for i in indices], self.pad_id))

    def loss(self, batch: TensorBatch) -> torch.Tensor:
        scores = pair_scores(self.model, batch)
        return self._pair_losses(scores).mean()

    def dev(self) -> DevScore:
        scored = self.score(self.dev_pairs)
        return DevScore(scored.loss, scored.metrics, scored.metrics[self.metric])

    @torch.no_grad()
    def score(self, pairs: Sequence[ScoredPair]) -> Scored:
        """`pairs` scored by the model as it is now: the mean loss, the pairwise accuracy (a tie
        counts as wrong), the mean margin and the mean chosen and rejected scores."""
        was_training = self.model.training
        self.model.eval()
        mine: list[tuple[int, tuple[float, ...]]] = []
        try:
            for number, start in enumerate(range(0, len(pairs), self.eval_batch_size)):
                if not my_turn(number):
                    continue
                chunk = pairs[start : start + self.eval_batch_size]
                scores = pair_scores(self.model, self._on_device(collate_pairs(chunk, self.pad_id)))
                chosen, rejected = scores.chosen.float(), scores.rejected.float()
                sums = (
                    self._pair_losses(PairScores(chosen, rejected)).sum().item(),
                    (chosen > rejected).sum().item(),
                    (chosen - rejected).sum().item(),
                    chosen.sum().item(),
                    rejected.sum().item(),
                )
                mine.append((number, sums))
        finally:
            self.model.train(was_training)
        totals = [sum(values) for values in zip(*gathered(mine), strict=True)]
        loss, right, margin, chosen_sum, rejected_sum = (value / len(pairs) for value in totals)
        return Scored(
            loss,
            {
                PAIRWISE_ACCURACY: right,
                REWARD_MARGIN: margin,
                CHOSEN_SCORE: chosen_sum,
                REJECTED_SCORE: rejected_sum,
            },
        )

    def _pair_losses(self, scores: PairScores) -> torch.Tensor:
        return reward_loss(
            scores.chosen, scores.rejected, center_coefficient=self.center_coefficient
        )

    def _on_device(self, batch: TensorBatch) -> TensorBatch:
        return {k: v.to(self.device) for k, v in batch.items()}
