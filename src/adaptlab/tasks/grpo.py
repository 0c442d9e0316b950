"""`grpo`: Group Relative Policy Optimization (Shao et al. 2024, "DeepSeekMath", §4.1) with a
verifiable reward (`adaptlab.tasks.verifiable_rewards`) on prompts alone (TRL's prompt-only
data, `adaptlab.data.preference.Question`). Each step samples `num_generations` completions of
every prompt of its batch from the policy as it is (the engine `adaptlab serve` generates
with, at `temperature`), scores each with the reward, takes each completion's advantage as its
reward standardised within its prompt's group (outcome supervision, Eq. 3 and §4.1.2) and
minimises the clipped surrogate, plus beta times the k3 estimate of the KL from the reference
(the base with the adapter off, or the adapters it is stacked on).

Defaults are TRL 1.16's `GRPOConfig`: 8 generations, epsilon 0.2, temperature 1.0, rewards
scaled by their group's standard deviation, the "dapo" loss (averaged over every completion
token of the batch) and beta 0.0, so no reference is read; Shao et al. trained with beta 0.04
(§4.2), which `beta` sets. By default one optimisation step per generation (TRL's
num_iterations 1), so the sampling policy's log-probabilities are the current ones, detached;
`num_iterations` (the paper's mu, Alg. 1) trains on each generated batch that many steps, its
ratio to the sampling policy clipped to [1 - epsilon, 1 + epsilon_high] (DAPO's clip-higher,
Yu et al. 2025 §3.1). Dev and test answer their prompts greedily and are judged by the mean
reward of those answers, with their exact match against the reference answers beside it. A run
of it is prepared by `adaptlab.runs.grpo_run`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from adaptlab.errors import ConfigError
from adaptlab.tasks.generative import GenerativeTask
from adaptlab.tasks.grpo_settings import EXACT_MATCH, GRPO_GENERATION, REWARD, GrpoSettings
from adaptlab.tasks.registry import register_task

if TYPE_CHECKING:
    from adaptlab.tasks.generative_settings import GenerativeSettings
    from adaptlab.tasks.task import RunAsked

TRAIN_REWARD = "train_reward"
TRAIN_REWARD_STD = "train_reward_std"
"""The mean and standard deviation of the rewards of the completions sampled in an epoch's
training steps (recorded with each epoch's dev metrics)."""
TRAIN_GROUP_STD = "train_reward_group_std"
"""The mean over an epoch's groups of their rewards' standard deviation (TRL's `reward_std`):
0 when every prompt's completions were rewarded alike, so nothing was learnt."""

GRPO_OPTIONS = (
    "reward",
    "format_pattern",
    "num_generations",
    "beta",
    "epsilon",
    "epsilon_high",
    "num_iterations",
    "temperature",
    "loss",
    "scale_rewards",
)
"""The data options of GRPO's objective (`adaptlab.tasks.grpo_settings`)."""


class GroupRelativePolicy(GenerativeTask):
    """A decoder tuned by GRPO on prompts, by a reward a program checks."""

    name = "grpo"
    summary = "group relative policy optimisation on prompts, scored by a verifiable reward"
    primary_metric = REWARD
    metrics = (REWARD, EXACT_MATCH)
    paired_metrics = (REWARD, EXACT_MATCH)
    data_shape = "prompt-only"
    data_marker = "GRPO"
    data_options = (*GRPO_OPTIONS, *GRPO_GENERATION)
    learning_rate_factor = 0.05
    """The generation defaults scaled as the preference tasks scale them (whole models at 1e-6,
    LoRA at 1e-4): policy-gradient steps, like DPO's, move a tuned model from where it is."""

    def settings(self, options: Mapping[str, Any]) -> GenerativeSettings:
        """`options` checked as a GRPO run reads them (`GrpoSettings`): the generative settings
        its sampling, dev and test generate by."""
        return GrpoSettings.of(options, self.name).generative

    def check_run(self, spec: RunAsked, analysed: bool) -> None:
        if analysed:
            raise ConfigError(
                "analyses read a model's representations of answers; a grpo run's data are "
                "prompts alone, so it takes none (analyse an sft run instead)"
            )


GRPO = register_task(GroupRelativePolicy())
