"""Training a decoder by KTO on answers judged desirable or not (`Objective`). A batch holds its
answers, each with its prompt, and as many mismatched rows (each prompt with the previous
answer of the batch, the last answer going to the first prompt) from which the reference point
is estimated, as TRL's `KTOTrainer` makes them; the policy reads the answers with gradients,
the mismatched rows without, and the reference (`adaptlab.engine.reference`) reads both without.
Dev is scored every epoch by the desirable and undesirable answers' implicit rewards and by the
`sft` metrics of the desirable answers."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn
from transformers import PreTrainedTokenizerBase

from adaptlab.data.encoding import IGNORE_INDEX
from adaptlab.data.generative_encoding import EncodedExample
from adaptlab.data.preference_encoding import EncodedJudged
from adaptlab.engine.completion_logps import completion_log_probs
from adaptlab.engine.objective import DevScore, TensorBatch
from adaptlab.engine.packing import collate_padded
from adaptlab.engine.preference_loss import kto_kl, kto_loss
from adaptlab.engine.reference import reference_model
from adaptlab.parallel.shared_evaluation import gathered, my_turn
from adaptlab.runs.generative_evaluation import AnswerScoring, Scored, score_split
from adaptlab.runs.preference_data import JudgedSplit
from adaptlab.tasks.kto import KL_ESTIMATE
from adaptlab.tasks.preference import REWARD_MARGIN
from adaptlab.tasks.preference_settings import PreferenceSettings


def mismatched(answers: Sequence[EncodedExample]) -> list[EncodedExample]:
    """Each answer's prompt followed by the previous answer (the last one's for the first):
    the rows the policy's KL from the reference is estimated on."""
    parts = [_at_answer(a) for a in answers]
    rows = []
    for (prompt, _, _), (_, answer, labels) in zip(parts, parts[-1:] + parts[:-1], strict=True):
        marks = (IGNORE_INDEX,) * len(prompt) + labels
        rows.append(EncodedExample(prompt + answer, marks))
    return rows


def _at_answer(example: EncodedExample) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """An encoded answer cut where its targets start: the prompt's ids, the answer's ids and
    the answer's labels."""
    start = next(i for i, label in enumerate(example.labels) if label != IGNORE_INDEX)
    return example.input_ids[:start], example.input_ids[start:], example.labels[start:]


def answer_logps(model: nn.Module, rows: TensorBatch) -> torch.Tensor:
    """Each row's summed answer log-probability under `model` as it runs now."""
    mask = rows["labels"].ne(IGNORE_INDEX).long()
    return completion_log_probs(model, rows["input_ids"], rows["attention_mask"], mask).sums


class KtoLm:
    """Tune `model` on `train`'s judged answers by KTO; score each epoch on `dev`."""

    title = ""

    def __init__(
        self,
        model: nn.Module,
        tokenizer: PreTrainedTokenizerBase,
        settings: PreferenceSettings,
        train: Sequence[EncodedJudged],
        dev: JudgedSplit,
        scoring: AnswerScoring,
    ) -> None:
        self.model, self.tokenizer, self.settings = model, tokenizer, settings
        self.train_answers, self.dev_split = train, dev
        self.scoring = scoring
        self.pad_id: int = tokenizer.pad_token_id
        self.device = next(model.parameters()).device

    @property
    def examples(self) -> int:
        return len(self.train_answers)

    def batch(self, indices: list[int], generator: torch.Generator) -> TensorBatch:
        return self._collated([self.train_answers[i] for i in indices])

    def loss(self, batch: TensorBatch) -> torch.Tensor:
        return self._losses(batch)[0].mean()

    def dev(self) -> DevScore:
        scored = self.score(self.dev_split)
        return DevScore(scored.loss, scored.metrics, self.scoring.judged(scored))

    def score(self, split: JudgedSplit) -> Scored:
        """`split` scored by the model as it is now: the answers' loss, rewards and KL
        estimate, and the desirable answers' perplexity and generated answers."""
        answers = score_split(
            self.model,
            self.tokenizer,
            split.desirable,
            self.scoring.generation,
            self.scoring.batch_size,
        )
        loss, metrics = self._judged_scores(split)
        return Scored(loss, {**answers.metrics, **metrics}, answers.generated)

    @property
    def metric(self) -> str:
        return self.scoring.metric

    def _collated(self, answers: Sequence[EncodedJudged]) -> TensorBatch:
        """The answers' rows, their mismatched rows (`kl_` keys) and whether each is desirable."""
        encoded = [a.answer for a in answers]
        rows = collate_padded(encoded, self.pad_id)
        kl = collate_padded(mismatched(encoded), self.pad_id)
        batch = {**rows, **{f"kl_{key}": value for key, value in kl.items()}}
        batch["desirable"] = torch.tensor([a.desirable for a in answers])
        return {k: v.to(self.device) for k, v in batch.items()}

    def _losses(self, batch: TensorBatch) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Per-answer KTO losses, implicit rewards (detached) and the batch's KL estimate."""
        rows = {k: batch[k] for k in ("input_ids", "attention_mask", "labels")}
        kl_rows = {k: batch[f"kl_{k}"] for k in ("input_ids", "attention_mask", "labels")}
        policy = answer_logps(self.model, rows)
        with torch.no_grad():
            policy_kl = answer_logps(self.model, kl_rows)
            with reference_model(self.model) as reference:
                reference_answers = answer_logps(reference, rows)
                reference_kl = answer_logps(reference, kl_rows)
        kl = kto_kl(policy_kl, reference_kl)
        settings = self.settings
        losses = kto_loss(
            settings.beta,
            policy,
            reference_answers,
            batch["desirable"],
            kl,
            desirable_weight=settings.desirable_weight,
            undesirable_weight=settings.undesirable_weight,
        )
        rewards = settings.beta * (policy - reference_answers).detach()
        return losses, rewards, kl

    @torch.no_grad()
    def _judged_scores(self, split: JudgedSplit) -> tuple[float, dict[str, float]]:
        """The mean KTO loss of `split`, the margin between its desirable and undesirable
        answers' mean rewards, and the mean KL estimate of its batches."""
        was_training = self.model.training
        self.model.eval()
        mine = []
        try:
            for number, start in enumerate(range(0, len(split.answers), self.scoring.batch_size)):
                if not my_turn(number):
                    continue
                batch = self._collated(split.answers[start : start + self.scoring.batch_size])
                losses, rewards, kl = self._losses(batch)
                good = batch["desirable"].bool()
                sums = (
                    losses.sum().item(),
                    rewards[good].sum().item(),
                    int(good.sum()),
                    rewards[~good].sum().item(),
                    int((~good).sum()),
                    kl.item() * len(losses),
                )
                mine.append((number, sums))
        finally:
            self.model.train(was_training)
        loss, good_sum, goods, bad_sum, bads, kl_sum = (
            sum(values) for values in zip(*gathered(mine), strict=True)
        )
        count = len(split.answers)
        margin = good_sum / max(goods, 1) - bad_sum / max(bads, 1)
        return loss / count, {REWARD_MARGIN: margin, KL_ESTIMATE: kl_sum / count}
