"""Rewards a program can check, for GRPO (`adaptlab.tasks.grpo`): each scores one completion
against the question's reference answer, `reward(completion, answer) -> float`, and a run picks
one by name (its data option `reward`). Built in:

- `exact`: 1.0 when the completion equals the reference as exact match compares them (SQuAD's
  normalisation: case, punctuation, articles and spacing ignored;
  `adaptlab.tasks.generation_metrics.exact_match`), else 0.0.
- `numeric`: 1.0 when the first number written in the completion equals the reference's
  number (`85`, `-3`, `1,024`, `2.50` = `2.5`), else 0.0 (none written: 0.0).
- `format`: 1.0 when the completion, stripped of surrounding whitespace, matches a regular
  expression as a whole (the data option `format_pattern`; by default one non-empty line of
  at most 80 characters), else 0.0. It needs no reference.

A reward of one's own is registered from Python (`register_reward("name", fn)`) before the run
and chosen by its name; it lives in the process that registered it, so a run in another
process (a Ray study's worker) must register it there too. Torch-free."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

from adaptlab.checks import shown
from adaptlab.errors import ConfigError, DataError
from adaptlab.registry import Registry
from adaptlab.tasks.generation_metrics import exact_match

RewardFunction = Callable[[str, str | None], float]
"""The reward of a completion given the question's reference answer (None: the data has none)."""

DEFAULT_REWARD = "exact"
DEFAULT_FORMAT = r"[^\n]{1,80}"
"""The `format` rule unless `format_pattern` says: one non-empty line of at most 80 characters."""
MAX_PATTERN_CHARS = 1000

_NUMBER = re.compile(r"-?\d+(?:,\d{3}(?!\d))*(?:\.\d+)?")


@dataclass(frozen=True)
class VerifiableReward:
    """A reward by name: how it scores, what it is in a line, and whether every question must
    carry a reference answer (checked before training)."""

    name: str
    score: RewardFunction
    summary: str = ""
    needs_answer: bool = False
    check_answer: Callable[[str], str | None] | None = None
    """What is wrong with a reference answer for this reward (None: nothing)."""

    def __call__(self, completion: str, answer: str | None) -> float:
        """The reward of `completion`, checked to be a finite number."""
        value = self.score(completion, answer)
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(f"reward {self.name} returned {shown(value)}; return a number")
        if not math.isfinite(value):
            raise ConfigError(f"reward {self.name} returned {value}; return a finite number")
        return float(value)

    def check_answers(self, answers: list[str | None], where: str) -> None:
        """Refuse, in one line, a question without the reference answer this reward reads, or
        with one it cannot read."""
        for number, answer in enumerate(answers, start=1):
            if answer is None or not answer.strip():
                if self.needs_answer:
                    raise DataError(
                        f"question {number} of {where} has no reference answer, which reward "
                        f"{self.name} checks against; give every question an answer"
                    )
                continue
            problem = self.check_answer(answer) if self.check_answer is not None else None
            if problem is not None:
                raise DataError(f"question {number} of {where}: {problem}")


REWARDS: Registry[VerifiableReward] = Registry("reward")
"""The rewards a GRPO run may name: the built-in ones, then any registered from Python."""


def register_reward(
    name: str,
    score: RewardFunction,
    *,
    summary: str = "",
    needs_answer: bool = False,
) -> VerifiableReward:
    """Make `score(completion, answer) -> float` the reward named `name` (a run's data option
    `reward`); `needs_answer`: every question must carry a reference answer. A name registered
    already is an error."""
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
        raise ConfigError(f"a reward's name is letters, digits, _ . or -, got {shown(name)}")
    if not callable(score):
        raise ConfigError(f"reward {name} must be a function (completion, answer), got {score!r}")
    return REWARDS.register(VerifiableReward(name, score, summary, needs_answer))


def get_reward(name: str) -> VerifiableReward:
    """The reward named `name`, or one line listing the known ones."""
    if not isinstance(name, str):
        raise ConfigError(f"reward must be a name, got {shown(name)}")
    return REWARDS.get(name)


def reward_for(name: str, format_pattern: str | None = None) -> VerifiableReward:
    """The reward a run scores by: `name`'s, or `format` with `format_pattern` (a pattern
    given to another reward is refused)."""
    if format_pattern is not None:
        if name != "format":
            raise ConfigError(
                f"format_pattern is read by the format reward only, not by {shown(name)}; drop it"
            )
        rule = FormatRule(checked_pattern(format_pattern))
        return VerifiableReward("format", rule, rule.summary)
    return get_reward(name)


def checked_pattern(pattern: object) -> str:
    """`pattern` if it is a regular expression Python compiles, else one line."""
    if not isinstance(pattern, str) or not pattern or len(pattern) > MAX_PATTERN_CHARS:
        raise ConfigError(
            f"format_pattern must be a regular expression of 1 to {MAX_PATTERN_CHARS} "
            f"characters, got {shown(pattern)}"
        )
    try:
        re.compile(pattern)
    except re.error as error:
        raise ConfigError(
            f"format_pattern {shown(pattern)} is not a regular expression: {error}"
        ) from None
    return pattern


def exact(completion: str, answer: str | None) -> float:
    """1.0 when `completion` equals `answer` under exact match's normalisation."""
    return 0.0 if answer is None else exact_match(completion, answer)


def first_number(text: str) -> Decimal | None:
    """The first number written in `text` (thousands commas allowed), or None."""
    found = _NUMBER.search(text)
    if found is None:
        return None
    try:
        return Decimal(found.group().replace(",", ""))
    except InvalidOperation:  # pragma: no cover - the pattern only finds numbers
        return None


def numeric(completion: str, answer: str | None) -> float:
    """1.0 when the first number in `completion` equals the first in `answer`."""
    wanted = None if answer is None else first_number(answer)
    written = first_number(completion)
    return float(wanted is not None and written is not None and written == wanted)


def _numeric_answer(answer: str) -> str | None:
    if first_number(answer) is None:
        return f"reference answer {shown(answer)} holds no number for the numeric reward"
    return None


@dataclass(frozen=True)
class FormatRule:
    """1.0 when the stripped completion matches `pattern` as a whole."""

    pattern: str = DEFAULT_FORMAT

    def __call__(self, completion: str, answer: str | None) -> float:
        return float(re.fullmatch(self.pattern, completion.strip()) is not None)

    @property
    def summary(self) -> str:
        return f"1 when the completion matches {self.pattern!r} as a whole"


REWARDS.register(
    VerifiableReward(
        "exact",
        exact,
        "1 when the completion equals the reference answer (exact match's normalisation)",
        needs_answer=True,
    )
)
REWARDS.register(
    VerifiableReward(
        "numeric",
        numeric,
        "1 when the completion's first number equals the reference answer's",
        needs_answer=True,
        check_answer=_numeric_answer,
    )
)
REWARDS.register(VerifiableReward("format", FormatRule(), FormatRule().summary))
