"""What a GRPO run reads from its spec's data options, checked once, before any work: the reward
(and the `format` reward's pattern), the group size, the KL coefficient, the clipping range (and
its upper end), the optimiser steps per generated batch, the sampling temperature, the loss's
averaging and how rewards are scaled, and the generation options (`GenerativeSettings`). Every
value is part of the run's id."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from adaptlab.checks import shown
from adaptlab.errors import ConfigError
from adaptlab.tasks.generative_settings import GenerativeSettings
from adaptlab.tasks.verifiable_rewards import DEFAULT_REWARD, VerifiableReward, reward_for

NUM_GENERATIONS = 8
"""Completions sampled per prompt (TRL's `num_generations`)."""
MAX_GENERATIONS = 1024
BETA = 0.0
"""The KL coefficient (TRL 1.16's default; Shao et al. 2024 used 0.04)."""
EPSILON = 0.2
"""The clipping range of the probability ratio (PPO's and TRL's)."""
NUM_ITERATIONS = 1
"""Optimiser steps per generated batch (the GRPO paper's mu, TRL's `num_iterations`)."""
TEMPERATURE = 1.0
"""The sampling temperature of the training completions (TRL's)."""
GRPO_LOSSES = ("dapo", "grpo")
""""dapo" averages the per-token terms over every completion token of the batch (TRL 1.16's
default); "grpo" over each completion's tokens, then over completions (Shao et al., Eq. 3)."""
REWARD_SCALES = ("group", "batch", "none")
"""Rewards minus their group's mean, divided by the group's standard deviation (the paper's),
by the batch's, or by nothing (Liu et al. 2025, Dr. GRPO)."""
REWARD = "reward"
"""The mean reward of the greedy answers to a split's prompts."""
EXACT_MATCH = "exact_match"
"""The share of greedy answers equal to their reference (questions with one)."""
GRPO_GENERATION = ("chat_template", "max_new_tokens", "stop", "metric")
"""The generation options it reads: how its prompts are rendered, how long its completions
may grow (sampled in training, greedy on dev and test), where they stop, what judges dev."""
JUDGED = (REWARD, EXACT_MATCH)
"""What may pick a GRPO run's best epoch."""


@dataclass(frozen=True)
class GrpoSettings:
    """The data options of a GRPO run, validated."""

    generative: GenerativeSettings
    reward: VerifiableReward
    num_generations: int = NUM_GENERATIONS
    beta: float = BETA
    epsilon: float = EPSILON
    epsilon_high: float | None = None
    """The upper clipping range: the ratio is clipped to [1 - epsilon, 1 + epsilon_high] (DAPO's
    clip-higher, Yu et al. 2025 §3.1; TRL's `epsilon_high`); None: `epsilon`."""
    num_iterations: int = NUM_ITERATIONS
    temperature: float = TEMPERATURE
    loss: str = "dapo"
    scale_rewards: str = "group"

    @property
    def metric(self) -> str:
        """The dev metric that picks the best epoch."""
        return self.generative.metric or REWARD

    @classmethod
    def of(cls, options: Mapping[str, Any], task: str) -> GrpoSettings:
        """`options` (a spec's `data_options`) for the task named `task`; a value of the wrong
        type or range is one line naming it (an option the task does not read was refused
        before)."""
        generative = {k: v for k, v in options.items() if k in ("task", *GRPO_GENERATION)}
        settings = GenerativeSettings.of(generative, task)
        if settings.metric is not None and settings.metric not in JUDGED:
            raise ConfigError(
                f"task {task} is not scored by {settings.metric!r}; pick one of {', '.join(JUDGED)}"
            )
        name = options.get("reward", DEFAULT_REWARD)
        return cls(
            generative=settings,
            reward=reward_for(name, options.get("format_pattern")),
            num_generations=_generations(options.get("num_generations", NUM_GENERATIONS)),
            beta=_number(options, "beta", BETA, low=0.0),
            epsilon=_epsilon(options),
            epsilon_high=_epsilon_high(options),
            num_iterations=_iterations(options.get("num_iterations", NUM_ITERATIONS)),
            temperature=_temperature(options),
            loss=_choice(options, "loss", GRPO_LOSSES),
            scale_rewards=_choice(options, "scale_rewards", REWARD_SCALES),
        )


def _generations(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 2:
        raise ConfigError(
            f"num_generations must be a whole number of at least 2 (a group's advantages "
            f"compare its completions), got {shown(value)}"
        )
    if value > MAX_GENERATIONS:
        raise ConfigError(f"num_generations must be at most {MAX_GENERATIONS}, got {value}")
    return value


def _iterations(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(
            f"num_iterations must be a whole number of at least 1 (optimiser steps per "
            f"generated batch), got {shown(value)}"
        )
    return value


def _number(options: Mapping[str, Any], key: str, default: float, *, low: float) -> float:
    value = options.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ConfigError(f"{key} must be a finite number, got {shown(value)}")
    if value < low:
        raise ConfigError(f"{key} must be at least {low:g}, got {shown(value)}")
    return float(value)


def _epsilon(options: Mapping[str, Any]) -> float:
    value = _number(options, "epsilon", EPSILON, low=0.0)
    if not 0 < value < 1:
        raise ConfigError(f"epsilon must be above 0 and below 1, got {shown(value)}")
    return value


def _epsilon_high(options: Mapping[str, Any]) -> float | None:
    """Any upper range above 0, as TRL takes any: below `epsilon` narrows it, above widens it."""
    if options.get("epsilon_high") is None:
        return None
    why = "at 0 a token of positive advantage stops learning as soon as its probability rises"
    return _above_zero(options, "epsilon_high", EPSILON, f"{why}, got 0")


def _temperature(options: Mapping[str, Any]) -> float:
    why = "greedy completions of one prompt are all alike, so their advantages are all 0"
    return _above_zero(options, "temperature", TEMPERATURE, why)


def _above_zero(options: Mapping[str, Any], key: str, default: float, why: str) -> float:
    """`key`'s number, at least 0 (`_number`) and not 0, for the reason `why`."""
    value = _number(options, key, default, low=0.0)
    if value == 0:
        raise ConfigError(f"{key} must be above 0: {why}")
    return value


def _choice(options: Mapping[str, Any], key: str, known: tuple[str, ...]) -> str:
    value = options.get(key, known[0])
    if value not in known:
        raise ConfigError(f"{key} must be one of {', '.join(known)}, got {shown(value)}")
    return str(value)
