"""The options of the preference tasks (`--task dpo|simpo|orpo`): the objective's beta, DPO's
loss and whether its reference is computed before training, SimPO's margin; and a reward
model's centring coefficient (`--task reward`). They join the run's data options
(`adaptlab.tasks.preference_settings` and `adaptlab.tasks.reward` check them), unset ones left
out, so other runs' options and ids are unchanged; one the task does not read is refused
(`adaptlab.tasks.unread_options`)."""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Annotated

import typer

from adaptlab.cli.option_group import Command, OptionalGroup, group_options, with_option_group
from adaptlab.tasks.preference_settings import DPO_LOSSES

Beta = Annotated[
    float | None,
    typer.Option(
        help="The objective's beta (default: dpo 0.1, simpo 2.0, orpo's lambda 0.1, kto 0.1; "
        "grpo's KL coefficient 0.0)."
    ),
]
Loss = Annotated[
    str | None,
    typer.Option(
        help=f"DPO's loss: {', '.join(DPO_LOSSES)} (default sigmoid); GRPO's: dapo (default) "
        "or grpo."
    ),
]
SimpoGamma = Annotated[
    float | None, typer.Option(help="SimPO's target reward margin gamma (default 1.0).")
]
CenterRewardsCoefficient = Annotated[
    float | None,
    typer.Option(
        help="A reward model's centring coefficient: adds it times the mean squared sum of a "
        "pair's scores to the loss, keeping scores near 0 (--task reward; TRL's, 0.01 advised)."
    ),
]
PrecomputeReference = Annotated[
    bool,
    typer.Option(
        help="Compute the reference's log-probabilities of every training pair once before "
        "training (dpo), instead of a reference forward pass at each step."
    ),
]

DesirableWeight = Annotated[
    float | None,
    typer.Option(help="KTO's weight of the desirable answers' loss (default 1)."),
]
UndesirableWeight = Annotated[
    float | None,
    typer.Option(help="KTO's weight of the undesirable answers' loss (default 1)."),
]


@dataclass(frozen=True)
class PreferenceOptions(OptionalGroup):
    """The preference options as given; None (False) where not given."""

    beta: Beta = None
    loss: Loss = None
    simpo_gamma: SimpoGamma = None
    precompute_reference: PrecomputeReference = False
    center_rewards_coefficient: CenterRewardsCoefficient = None
    desirable_weight: DesirableWeight = None
    undesirable_weight: UndesirableWeight = None


DEFAULT_PREFERENCE = PreferenceOptions()
"""No option given: the `preference` parameter's default in a command."""


def with_preference_options(names: Collection[str] | None = None) -> Callable[[Command], Command]:
    """Give a command the preference options `names` (default: all) in place of its
    `preference` parameter; the others keep their defaults."""
    options = group_options(PreferenceOptions, names)
    return with_option_group("preference", PreferenceOptions, options)
