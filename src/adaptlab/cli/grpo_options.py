"""The options of GRPO (`--task grpo`): the verifiable reward (and the `format` reward's
pattern), completions per prompt, the clipping range and its upper end, the optimiser steps per
generated batch, the sampling temperature and how rewards are scaled; its KL coefficient and
loss are the preference tasks' `--beta` and `--loss`. They join the run's data options
(`adaptlab.tasks.grpo_settings` checks them), unset ones left out, so other runs' options and
ids are unchanged; one the task does not read is refused (`adaptlab.tasks.unread_options`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated

import typer

from adaptlab.cli.option_group import Command, OptionalGroup, group_options, with_option_group
from adaptlab.tasks.verifiable_rewards import REWARDS

Reward = Annotated[
    str | None,
    typer.Option(
        help=f"GRPO's verifiable reward: {', '.join(REWARDS.listed())}, or one registered from "
        "Python with register_reward (default exact)."
    ),
]
FormatPattern = Annotated[
    str | None,
    typer.Option(
        help="The format reward's regular expression, matched against the whole stripped "
        "completion (default: one line of 1-80 characters)."
    ),
]
NumGenerations = Annotated[
    int | None,
    typer.Option(help="GRPO: completions sampled per prompt, at least 2 (default 8)."),
]
Epsilon = Annotated[
    float | None,
    typer.Option(help="GRPO: the probability ratio's clipping range, in (0, 1) (default 0.2)."),
]
EpsilonHigh = Annotated[
    float | None,
    typer.Option(
        help="GRPO: the ratio's upper clipping range, above 0 (DAPO's clip-higher, 0.28 there; "
        "default: --epsilon). It acts from the second step on a batch (--num-iterations)."
    ),
]
NumIterations = Annotated[
    int | None,
    typer.Option(
        help="GRPO: optimiser steps on each generated batch, at least 1 (the paper's mu; "
        "default 1)."
    ),
]
Temperature = Annotated[
    float | None,
    typer.Option(help="GRPO: the temperature training completions are sampled at (default 1.0)."),
]
ScaleRewards = Annotated[
    str | None,
    typer.Option(
        help="GRPO: divide advantages by the group's reward spread (group), the batch's "
        "(batch) or nothing (none) (default group)."
    ),
]


@dataclass(frozen=True)
class GrpoOptions(OptionalGroup):
    """The GRPO options as given; None where not given."""

    reward: Reward = None
    format_pattern: FormatPattern = None
    num_generations: NumGenerations = None
    epsilon: Epsilon = None
    epsilon_high: EpsilonHigh = None
    num_iterations: NumIterations = None
    temperature: Temperature = None
    scale_rewards: ScaleRewards = None


DEFAULT_GRPO = GrpoOptions()
"""No option given: the `grpo` parameter's default in a command."""


def with_grpo_options() -> Callable[[Command], Command]:
    """Give a command the GRPO options in place of its `grpo` parameter."""
    return with_option_group("grpo", GrpoOptions, group_options(GrpoOptions))
