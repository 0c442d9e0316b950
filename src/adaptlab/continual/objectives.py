"""Every sequence objective by name: what a sequence's stages train for. An objective's module
registers one `SequenceObjective` (`register_objective`); adaptlab's own are imported when first
looked up and define theirs without torch, so specs, records and the report read objectives
freely. Which objectives there are, and the stored form of a spec's objective, come from here."""

from __future__ import annotations

from collections.abc import Iterable

from adaptlab.continual.sequence_objective import SequenceObjective
from adaptlab.errors import ConfigError
from adaptlab.registry import Registry
from adaptlab.tasks.unread_options import described, refuse_unread

OBJECTIVES: Registry[SequenceObjective] = Registry(
    "objective",
    builtin={
        "classification": "adaptlab.continual.classification",
        "causal-lm": "adaptlab.continual.causal_lm",
        "sft": "adaptlab.continual.answers",
        "chat": "adaptlab.continual.answers",
    },
)
"""adaptlab's objectives (listed first, in this order) and any registered from outside."""

DEFAULT_OBJECTIVE = "classification"
"""The objective of a spec that names none (every spec written before there were others); a
spec stores its objective only when it is another one, so those specs keep their ids."""


def register_objective(objective: SequenceObjective) -> SequenceObjective:
    """Add `objective` (an instance of a `SequenceObjective` subclass) under its name."""
    return OBJECTIVES.register(objective)


def get_objective(name: str) -> SequenceObjective:
    """The objective registered as `name`, or a one-line error listing the known ones."""
    return OBJECTIVES.get(name)


def objective_names() -> list[str]:
    """Every objective's name in listing order, importing none of them."""
    return OBJECTIVES.listed()


def known_objective(name: object) -> bool:
    """Whether `name` names an objective (built-in or registered)."""
    return isinstance(name, str) and name in OBJECTIVES


def check_objective_name(name: object) -> None:
    """`name` must name an objective: one line listing them otherwise."""
    if not known_objective(name):
        raise ConfigError(f"objective must be one of {', '.join(objective_names())}, got {name!r}")


def refuse_unread_by_objective(given: Iterable[str], name: str) -> None:
    """`refuse_unread` of the data options objective `name`'s stages read (its `data_options`),
    naming the objectives whose stages read one it does not."""
    readers = {each.name: each.data_options for each in OBJECTIVES}
    reads = get_objective(name).data_options
    refuse_unread(given, reads, readers, "sequence", described(name, "sequence"))


def is_default_objective(name: str) -> bool:
    """Whether `name` is the objective a spec means when it names none (`DEFAULT_OBJECTIVE`)."""
    return name == DEFAULT_OBJECTIVE
