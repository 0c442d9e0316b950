"""Training a decoder on preference pairs (`Objective`): a batch is its pairs' chosen sequences
then their rejected ones, right-padded, so the policy reads both in one forward pass; each
answer's log-probability is the sum over its tokens, read from the chunked LM head
(`adaptlab.engine.completion_logps`: the logits never exist whole). DPO compares them with the
reference's (`adaptlab.engine.reference`: the same model object with the trained adapter off),
computed with no gradient at each step or, with `precompute_reference`, once before training;
SimPO and ORPO need none. Dev is scored every epoch by the implicit rewards of its pairs and by
the `sft` metrics of the chosen answers (`adaptlab.runs.generative_evaluation`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import nn
from transformers import PreTrainedTokenizerBase

from adaptlab.data.encoding import IGNORE_INDEX
from adaptlab.data.preference_encoding import EncodedPair
from adaptlab.engine.completion_logps import completion_log_probs
from adaptlab.engine.objective import DevScore, TensorBatch
from adaptlab.engine.packing import collate_padded
from adaptlab.engine.preference_loss import (
    PairLogps,
    dpo_loss,
    orpo_loss,
    pair_rewards,
    simpo_loss,
)
from adaptlab.engine.reference import reference_model
from adaptlab.parallel.shared_evaluation import gathered, my_turn
from adaptlab.runs.generative_evaluation import AnswerScoring, Scored, score_split
from adaptlab.runs.preference_data import PreferenceSplit
from adaptlab.tasks.preference import (
    CHOSEN_LOGPS,
    REJECTED_LOGPS,
    REWARD_ACCURACY,
    REWARD_MARGIN,
    PreferenceTask,
)
from adaptlab.tasks.preference_settings import PreferenceSettings

PairLoss = Callable[[PreferenceSettings, PairLogps, PairLogps | None], torch.Tensor]


def _dpo(
    settings: PreferenceSettings, policy: PairLogps, reference: PairLogps | None
) -> torch.Tensor:
    assert reference is not None
    return dpo_loss(settings.loss, settings.beta, policy, reference)


def _simpo(settings: PreferenceSettings, policy: PairLogps, _: PairLogps | None) -> torch.Tensor:
    return simpo_loss(policy, settings.beta, settings.simpo_gamma / settings.beta)


def _orpo(settings: PreferenceSettings, policy: PairLogps, _: PairLogps | None) -> torch.Tensor:
    """ORPO with the paper's NLL: the chosen answers' tokens only (Hong et al. 2024, Eq. 2),
    pooled over the batch as TRL pools it (TRL's also counts the prompts' tokens)."""
    nll = -policy.chosen.sum() / policy.chosen_tokens.sum().clamp(min=1)
    return orpo_loss(policy, settings.beta, nll)


PAIR_LOSSES: dict[str, PairLoss] = {"dpo": _dpo, "simpo": _simpo, "orpo": _orpo}
"""Each preference task's per-pair loss, by task name."""


def collate_pairs(pairs: Sequence[EncodedPair], pad_id: int) -> TensorBatch:
    """The pairs one a row, each holding its chosen and its rejected sequence, right-padded:
    `input_ids`, `attention_mask` and `completion_mask` (1 on the answers' tokens), each
    (pairs, 2, length), so a batch shared between processes is cut between pairs."""
    rows = collate_padded([p.chosen for p in pairs] + [p.rejected for p in pairs], pad_id)
    labels = rows.pop("labels")
    rows["completion_mask"] = labels.ne(IGNORE_INDEX).long()
    return {key: value.unflatten(0, (2, len(pairs))).transpose(0, 1) for key, value in rows.items()}


def pair_logps(model: nn.Module, batch: TensorBatch) -> PairLogps:
    """Each pair's summed answer log-probabilities under `model` as it runs now, its chosen
    and rejected sequences read in one forward pass."""
    chosen_then_rejected = {
        key: batch[key].transpose(0, 1).flatten(0, 1)
        for key in ("input_ids", "attention_mask", "completion_mask")
    }
    read = completion_log_probs(
        model,
        chosen_then_rejected["input_ids"],
        chosen_then_rejected["attention_mask"],
        chosen_then_rejected["completion_mask"],
    )
    chosen, rejected = read.sums.chunk(2)
    chosen_tokens, rejected_tokens = read.tokens.chunk(2)
    return PairLogps(chosen, rejected, chosen_tokens, rejected_tokens)


class PreferenceLm:
    """Tune `model` on `train`'s pairs by `task`'s loss; score each epoch on `dev`."""

    title = ""

    def __init__(
        self,
        model: nn.Module,
        tokenizer: PreTrainedTokenizerBase,
        task: PreferenceTask,
        settings: PreferenceSettings,
        train: Sequence[EncodedPair],
        dev: PreferenceSplit,
        scoring: AnswerScoring,
    ) -> None:
        self.model, self.tokenizer, self.task, self.settings = model, tokenizer, task, settings
        self.train_pairs, self.dev_split = train, dev
        self.scoring = scoring
        self.pad_id: int = tokenizer.pad_token_id
        self.device = next(model.parameters()).device
        self.pair_loss = PAIR_LOSSES[task.name]
        self._train_reference: PairLogps | None = None  # with precompute_reference
        self._dev_reference: dict[int, PairLogps] = {}  # by split identity

    @property
    def examples(self) -> int:
        return len(self.train_pairs)

    def batch(self, indices: list[int], generator: torch.Generator) -> TensorBatch:
        batch = collate_pairs([self.train_pairs[i] for i in indices], self.pad_id)
        batch["index"] = torch.tensor(indices)
        return {k: v.to(self.device) for k, v in batch.items()}

    def loss(self, batch: TensorBatch) -> torch.Tensor:
        policy = pair_logps(self.model, batch)
        reference = None
        if self.task.uses_reference:
            reference = self._reference_of(batch)
        return self.pair_loss(self.settings, policy, reference).mean()

    def dev(self) -> DevScore:
        scored = self.score(self.dev_split)
        return DevScore(scored.loss, scored.metrics, self.scoring.judged(scored))

    def score(self, split: PreferenceSplit) -> Scored:
        """`split` scored by the model as it is now: the pairs' loss and rewards, and the
        chosen answers' perplexity and generated answers."""
        answers = score_split(
            self.model,
            self.tokenizer,
            split.chosen,
            self.scoring.generation,
            self.scoring.batch_size,
        )
        loss, pairs = self._pair_scores(split)
        return Scored(loss, {**answers.metrics, **pairs}, answers.generated)

    @property
    def metric(self) -> str:
        return self.scoring.metric

    @torch.no_grad()
    def _pair_scores(self, split: PreferenceSplit) -> tuple[float, dict[str, float]]:
        """The mean pair loss and the pair metrics of `split`."""
        was_training = self.model.training
        self.model.eval()
        try:
            reference = self._split_reference(split) if self.task.uses_reference else None
            mine = []
            for number, start in enumerate(range(0, len(split.pairs), self.scoring.batch_size)):
                if not my_turn(number):
                    continue
                end = start + self.scoring.batch_size
                batch = self._on_device(collate_pairs(split.pairs[start:end], self.pad_id))
                policy = pair_logps(self.model, batch)
                ref = None if reference is None else _rows(reference, start, end, self.device)
                losses = self.pair_loss(self.settings, policy, ref)
                rewards = pair_rewards(self.settings.beta, policy, ref)
                sums = (
                    losses.sum().item(),
                    rewards.accuracies().sum().item(),
                    rewards.margins().sum().item(),
                    policy.chosen.sum().item(),
                    policy.rejected.sum().item(),
                )
                mine.append((number, sums))
        finally:
            self.model.train(was_training)
        totals = [sum(values) for values in zip(*gathered(mine), strict=True)]
        count = len(split.pairs)
        loss, right, margin, chosen_sum, rejected_sum = (value / count for value in totals)
        return loss, {
            REWARD_ACCURACY: right,
            REWARD_MARGIN: margin,
            CHOSEN_LOGPS: chosen_sum,
            REJECTED_LOGPS: rejected_sum,
        }

    def _reference_of(self, batch: TensorBatch) -> PairLogps:
        """The reference's log-probabilities of a training batch: looked up when precomputed,
        else computed now with no gradient."""
        if self.settings.precompute_reference:
            if self._train_reference is None:
                self._train_reference = self._all_reference(self.train_pairs)
            index = batch["index"].cpu()
            every = self._train_reference
            return PairLogps(*(part[index].to(self.device) for part in _parts(every)))
        with torch.no_grad(), reference_model(self.model) as reference:
            return _detached(pair_logps(reference, batch))

    def _split_reference(self, split: PreferenceSplit) -> PairLogps:
        """The reference's log-probabilities of a dev or test split, computed once."""
        key = id(split)
        if key not in self._dev_reference:
            self._dev_reference[key] = self._all_reference(split.pairs)
        return self._dev_reference[key]

    @torch.no_grad()
    def _all_reference(self, pairs: Sequence[EncodedPair]) -> PairLogps:
        """The reference's log-probabilities of every pair of `pairs`, on the CPU."""
        was_training = self.model.training
        self.model.eval()
        parts: list[PairLogps] = []
        try:
            with reference_model(self.model) as reference:
                for start in range(0, len(pairs), self.scoring.batch_size):
                    chunk = pairs[start : start + self.scoring.batch_size]
                    batch = self._on_device(collate_pairs(chunk, self.pad_id))
                    parts.append(_detached(pair_logps(reference, batch), cpu=True))
        finally:
            self.model.train(was_training)
        return PairLogps(*(torch.cat(column) for column in zip(*map(_parts, parts), strict=True)))

    def _on_device(self, batch: TensorBatch) -> TensorBatch:
        return {k: v.to(self.device) for k, v in batch.items()}


def _parts(logps: PairLogps) -> tuple[torch.Tensor, ...]:
    return (logps.chosen, logps.rejected, logps.chosen_tokens, logps.rejected_tokens)


def _rows(logps: PairLogps, start: int, end: int, device: torch.device) -> PairLogps:
    return PairLogps(*(part[start:end].to(device) for part in _parts(logps)))


def _detached(logps: PairLogps, cpu: bool = False) -> PairLogps:
    parts = (part.detach() for part in _parts(logps))
    return PairLogps(*(part.cpu() if cpu else part for part in parts))
