"""Training a decoder by GRPO on prompts (`Objective`). A training batch is made by sampling: the
batch's prompts each get `num_generations` completions from the policy as it is (eval mode, no
gradient, at the run's temperature; `adaptlab.engine.group_sampling`, seeded from the loop's
generator so a run repeats), each completion is scored by the reward, and the rewards become
advantages within their prompt's group (`adaptlab.engine.preference_loss.group_advantages`).
A row is the prompt's ids followed by the completion's: its text tokenised (the engine hands
back text, so a completion is trained on as its text tokenises, which for a few tokenizers is
not the very tokens drawn), then the end-of-text token when the completion ended by itself
(a completion cut at `max_new_tokens` has none, as in TRL). The loss
(`adaptlab.engine.preference_loss.grpo_loss`) reads the policy's per-token log-probabilities
through the chunked LM head (`adaptlab.engine.completion_logps`); one optimisation step per
generation, so the sampling policy's log-probabilities are the current ones detached; with
beta > 0 the reference (`adaptlab.engine.reference`) reads the rows too, with no gradient.

Each step's sampled rewards are logged (train.log), and every epoch records their mean and
spread beside its dev metrics. Dev (and test) answer their prompts greedily, as `sft` does,
and are scored by the mean reward of the answers and their exact match with the reference
answers (the questions that have one); GRPO has no loss on prompts alone, so the loss they
record is the negated mean reward."""

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
from adaptlab.engine.generation import end_ids
from adaptlab.engine.group_sampling import Sampled, sample_groups
from adaptlab.engine.objective import DevScore
from adaptlab.engine.packing import collate_padded
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

Batch = dict[str, torch.Tensor]
SEED_RANGE = 2**31 - 1
"""A step's sampling seed is drawn below this from the loop's generator (each completion adds
its number to it, and seeds stay within what every generator takes)."""


def sample_rows(
    prompts: Sequence[Sequence[int]],
    samples: Sequence[Sampled],
    group: int,
    tokenizer: PreTrainedTokenizerBase,
    end: int | None,
) -> list[EncodedExample]:
    """Each completion's row (prompt-major, `group` a prompt): the prompt's ids, then the
    completion's text tokenised, then `end` when it ended by itself; only the completion's
    tokens are targets."""
    rows = []
    for index, sample in enumerate(samples):
        prompt = list(prompts[index // group])
        answer: list[int] = tokenizer(sample.text, add_special_tokens=False)["input_ids"]
        if sample.ended and end is not None:
            answer = [*answer, end]
        labels = [IGNORE_INDEX] * len(prompt) + answer
        rows.append(EncodedExample(tuple(prompt + answer), tuple(labels)))
    return rows


def end_token(model: nn.Module, tokenizer: PreTrainedTokenizerBase) -> int | None:
    """The token that ends a completion as the engine ends it: the tokenizer's EOS when the
    model stops there, else the first of the model's own end tokens (None: it has none)."""
    ends = end_ids(model, tokenizer)
    if tokenizer.eos_token_id in ends:
        return int(tokenizer.eos_token_id)
    return min(ends) if ends else None


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
    ) -> None:
        self.model, self.tokenizer, self.settings = model, tokenizer, settings
        self.train_split, self.dev_split = train, dev
        self.eval_batch_size = eval_batch_size
        self.pad_id: int = tokenizer.pad_token_id
        self.device = next(model.parameters()).device
        self.end = end_token(model, tokenizer)
        self.sampled: list[float] = []  # this epoch's sampled rewards, prompt-major
        self.steps = 0

    @property
    def metric(self) -> str:
        return self.settings.metric

    @property
    def examples(self) -> int:
        return len(self.train_split)

    def batch(self, indices: list[int], generator: torch.Generator) -> Batch:
        """The prompts `indices` each answered `num_generations` times by the policy as it is,
        the answers scored and their advantages taken within each prompt's group."""
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
        rows = sample_rows(prompts, samples, group, self.tokenizer, self.end)
        padded = collate_padded(rows, self.pad_id)
        labels = padded.pop("labels")
        batch = {**padded, "completion_mask": labels.ne(IGNORE_INDEX).long()}
        batch["advantages"] = advantages.float()
        return {k: v.to(self.device) for k, v in batch.items()}

    def loss(self, batch: Batch) -> torch.Tensor:
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
            reference_logps=reference,
            beta=self.settings.beta,
            epsilon=self.settings.epsilon,
        )

    def loss_terms(self, batch: Batch) -> int:
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
        """Log a step's sampled rewards and keep them for the epoch's record."""
        self.steps += 1
        self.sampled.extend(rewards)
        spread = statistics.pstdev(rewards) if len(rewards) > 1 else 0.0
        log.info(
            "%sstep %d sampled reward mean %.4f std %.4f group std %.4f",
            *(self.title, self.steps, statistics.fmean(rewards), spread),
            _group_std(rewards, self.settings.num_generations),
        )

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
