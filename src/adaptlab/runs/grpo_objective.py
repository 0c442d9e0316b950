"""Training a decoder by GRPO on prompts (`Objective`). A training batch is made by sampling: the
batch's prompts each get `num_generations` completions from the policy as it is (eval mode, no
gradient, at the run's temperature; `adaptlab.engine.group_sampling`, seeded from the loop's
generator so a run repeats), each completion is scored by the reward, and the rewards become
advantages within their prompt's group (`adaptlab.engine.preference_loss.group_advantages`).
A row is the prompt's ids followed by the ids the completion drew (`sample_rows`), so the ratio
and the KL are of the very tokens the policy sampled. The loss
(`adaptlab.engine.preference_loss.grpo_loss`) reads the policy's per-token log-probabilities
through the chunked LM head (`adaptlab.engine.completion_logps`). Each batch is trained on for
`num_iterations` optimiser steps in a row (the paper's mu, Shao et al. 2024 Alg. 1; the loop
makes the batch once for them, `adaptlab.engine.objective.ReusesBatches`): with one, the
sampling policy's log-probabilities are the current ones detached; with more, they are computed
once as the batch is made (no gradient, at the run's precision, as TRL 1.16 computes its
`old_per_token_logps`), and every step's ratio to them is clipped to [1 - epsilon,
1 + epsilon_high] (Eq. 3, with DAPO's clip-higher, Yu et al. 2025 §3.1). With beta > 0 the
reference (`adaptlab.engine.reference`) reads the rows too, with no gradient.

Each batch's sampled rewards are logged (train.log, at the first step it trains), and every
epoch records their mean and spread beside its dev metrics. Dev (and test) answer their prompts
greedily, as `sft` does, and are scored by the mean reward of the answers and their exact match
with the reference answers (the questions that have one); GRPO has no loss on prompts alone, so
the loss they record is the negated mean reward."""

from __future__ import annotations

import logging
import statistics
from collections.abc import Sequence
from typing import cast

import torch
from torch import nn
from transformers import PreTrainedTokenizerBase

from adaptlab.data.encoding import IGNORE_INDEX
from adaptlab.data.generative_encoding import EncodedExample
from adaptlab.engine.completion_logps import completion_token_log_probs
from adaptlab.engine.group_sampling import Sampled, sample_groups
from adaptlab.engine.objective import DevScore, TensorBatch
from adaptlab.engine.packing import collate_padded
from adaptlab.engine.precision import autocast_at
from adaptlab.engine.preference_loss import GrpoLoss, RewardScale, group_advantages, grpo_loss
from adaptlab.engine.reference import reference_model
from adaptlab.parallel.shared_evaluation import gathered, my_turn
from adaptlab.records.generated import Generated
from adaptlab.runs.generative_evaluation import Scored, generate_answers
from adaptlab.runs.grpo_data import QuestionSplit
from adaptlab.tasks.generation_metrics import exact_match
from adaptlab.tasks.grpo import (
    EXACT_MATCH,
    REWARD,
    TRAIN_GROUP_STD,
    TRAIN_REWARD,
    TRAIN_REWARD_STD,
)
from adaptlab.tasks.grpo_settings import GrpoSettings

log = logging.getLogger("adaptlab.train")

SEED_RANGE = 2**31 - 1
"""A step's sampling seed is drawn below this from the loop's generator (each completion adds
its number to it, and seeds stay within what every generator takes)."""


def sample_rows(
    prompts: Sequence[Sequence[int]], samples: Sequence[Sampled], group: int
) -> list[EncodedExample]:
    """Each completion's row (prompt-major, `group` a prompt): the prompt's ids, then the ids
    the completion drew, which alone are targets.

    The ids drawn, not the text tokenised again, which need not give them back (two tokens the
    tokenizer writes as one, a special token that decodes to no text). A completion the end of
    text ended keeps that token and one cut at `max_new_tokens` has none, as TRL 1.16's
    GRPOTrainer trains on the generated ids cut after the first EOS. One a stop string ended
    keeps every token it drew, the one that completed the stop string too, and no end-of-text
    token (none was drawn): its reward reads the text cut before the stop string, but its ratio
    and KL are of the tokens the policy drew, and a rewarded completion teaches the stop
    string, which is where `adaptlab serve` ends it too. TRL has no stop strings of its own:
    it trains on the ids its generation backend hands back and decodes them for the reward."""
    rows = []
    for index, sample in enumerate(samples):
        prompt = prompts[index // group]
        labels = (IGNORE_INDEX,) * len(prompt) + sample.ids
        rows.append(EncodedExample((*prompt, *sample.ids), labels))
    return rows


class GroupRelativeLm:
    """Tune `model` by GRPO on `train`'s prompts; answer `dev`'s greedily every epoch."""

    title = ""

    def __init__(
        self,
        model: nn.Module,
        tokenizer: PreTrainedTokenizerBase,
        settings: GrpoSettings,
        train: QuestionSplit,
        dev: QuestionSplit,
        *,
        eval_batch_size: int,
        precision: str = "fp32",
    ) -> None:
        self.model, self.tokenizer, self.settings = model, tokenizer, settings
        self.train_split, self.dev_split = train, dev
        self.eval_batch_size, self.precision = eval_batch_size, precision
        self.pad_id: int = tokenizer.pad_token_id
        self.device = next(model.parameters()).device
        self.sampled: list[float] = []  # this epoch's sampled rewards, prompt-major
        self.steps = 0

    @property
    def metric(self) -> str:
        return self.settings.metric

    @property
    def examples(self) -> int:
        return len(self.train_split)

    @property
    def updates_per_batch(self) -> int:
        """The optimiser steps on each generated batch (`num_iterations`)."""
        return self.settings.num_iterations

    def batch(self, indices: list[int], generator: torch.Generator) -> TensorBatch:
        """The prompts `indices` each answered `num_generations` times by the policy as it is,
        the answers scored and their advantages taken within each prompt's group; with
        `num_iterations` > 1, the sampling policy's log-probabilities of them too."""
        settings, group = self.settings, self.settings.num_generations
        seed = int(torch.randint(SEED_RANGE, (), generator=generator))
        prompts = [self.train_split.prompts[i] for i in indices]
        generative = settings.generative
        samples = sample_groups(
            self.model,
            self.tokenizer,
            prompts,
            group=group,
            max_new_tokens=generative.max_new_tokens,
            temperature=settings.temperature,
            seed=seed,
            stop=generative.stop,
        )
        answers = [self.train_split.answers[i] for i in indices for _ in range(group)]
        rewards = [settings.reward(s.text, a) for s, a in zip(samples, answers, strict=True)]
        self._tell(rewards)
        scale = cast(RewardScale, settings.scale_rewards)
        advantages = group_advantages(torch.tensor(rewards), group, scale)
        padded = collate_padded(sample_rows(prompts, samples, group), self.pad_id)
        labels = padded.pop("labels")
        made = {**padded, "completion_mask": labels.ne(IGNORE_INDEX).long()}
        made["advantages"] = advantages.float()
        batch = {k: v.to(self.device) for k, v in made.items()}
        if settings.num_iterations > 1:
            batch["old_logps"] = self._sampling_logps(batch)
        return batch

    @torch.no_grad()
    def _sampling_logps(self, batch: TensorBatch) -> torch.Tensor:
        """The per-token log-probabilities of `batch`'s completions under the policy that drew
        them (Eq. 3's pi_old), at the precision the loss reads the policy at, so the first
        step's ratio is 1."""
        with autocast_at(self.precision, self.device):
            return completion_token_log_probs(
                self.model, batch["input_ids"], batch["attention_mask"], batch["completion_mask"]
            )

    def loss(self, batch: TensorBatch) -> torch.Tensor:
        """GRPO's loss of the sampled rows (see the module docstring)."""
        ids, attention, completion = (
            batch["input_ids"],
            batch["attention_mask"],
            batch["completion_mask"],
        )
        logps = completion_token_log_probs(self.model, ids, attention, completion)
        reference = None
        if self.settings.beta > 0:
            with torch.no_grad(), reference_model(self.model) as frozen:
                reference = completion_token_log_probs(frozen, ids, attention, completion)
        return grpo_loss(
            cast(GrpoLoss, self.settings.loss),
            logps,
            completion[:, 1:],
            batch["advantages"],
            old_logps=batch.get("old_logps"),
            reference_logps=reference,
            beta=self.settings.beta,
            epsilon=self.settings.epsilon,
            epsilon_high=self.settings.epsilon_high,
        )

    def loss_terms(self, batch: TensorBatch) -> int:
        """What the loss averages over: completion tokens ("dapo"), or completions."""
        if self.settings.loss == "dapo":
            return int(batch["completion_mask"][:, 1:].sum().item())
        return int(batch["input_ids"].shape[0])

    def dev(self) -> DevScore:
        answered = self.score(self.dev_split)
        metrics = {**answered.metrics, **self._epoch_rewards()}
        return DevScore(answered.loss, metrics, answered.metrics[self.metric])

    @torch.no_grad()
    def score(self, split: QuestionSplit) -> Scored:
        """`split`'s prompts answered greedily by the model as it is, and scored."""
        generative = self.settings.generative
        mine: list[tuple[int, list[str]]] = []
        for number, start in enumerate(range(0, len(split), self.eval_batch_size)):
            if my_turn(number):  # batches shared out over a multi-process run's processes
                texts = generate_answers(
                    self.model,
                    self.tokenizer,
                    split.prompts[start : start + self.eval_batch_size],
                    max_new_tokens=generative.max_new_tokens,
                    stop=generative.stop,
                    batch_size=self.eval_batch_size,
                )
                mine.append((number, texts))
        answers = [text for texts in gathered(mine) for text in texts]
        pairs = list(zip(answers, split.answers, strict=True))
        rewards = [self.settings.reward(text, reference) for text, reference in pairs]
        mean = sum(rewards) / len(rewards)
        metrics = {REWARD: mean}
        checked = [exact_match(text, reference) for text, reference in pairs if reference]
        if checked:
            metrics[EXACT_MATCH] = sum(checked) / len(checked)
        generated = tuple(
            Generated(prompt, text, reference or "")
            for prompt, (text, reference) in zip(split.texts, pairs, strict=True)
        )
        return Scored(-mean, metrics, generated)

    def _tell(self, rewards: list[float]) -> None:
        """Log a batch's sampled rewards (at the first step it trains) and keep them for the
        epoch's record."""
        self.sampled.extend(rewards)
        spread = statistics.pstdev(rewards) if len(rewards) > 1 else 0.0
        log.info(
            "%sstep %d sampled reward mean %.4f std %.4f group std %.4f",
            *(self.title, self.steps + 1, statistics.fmean(rewards), spread),
            _group_std(rewards, self.settings.num_generations),
        )
        self.steps += self.settings.num_iterations

    def _epoch_rewards(self) -> dict[str, float]:
        """The mean and spread of this epoch's sampled rewards (none sampled: nothing)."""
        rewards, self.sampled = self.sampled, []
        if not rewards:
            return {}
        return {
            TRAIN_REWARD: statistics.fmean(rewards),
            TRAIN_REWARD_STD: statistics.pstdev(rewards),
            TRAIN_GROUP_STD: _group_std(rewards, self.settings.num_generations),
        }


def _group_std(rewards: Sequence[float], group: int) -> float:
    """The mean over groups of their rewards' standard deviation (Bessel-corrected, as TRL's
    `reward_std`): 0 when no group holds two different rewards, so nothing is learnt."""
    groups = [rewards[i : i + group] for i in range(0, len(rewards), group)]
    return statistics.fmean(statistics.stdev(g) if len(g) > 1 else 0.0 for g in groups)
