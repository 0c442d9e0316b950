"""The records of preference and reward data, in TRL's formats: a prompt with the answer
preferred and the one rejected (`Preference`, DPO and its kin, reward models), a prompt with
one answer judged desirable or not (`Judged`, KTO's unpaired data), and a prompt alone with
what a verifiable reward checks its answers against (`Question`, GRPO). A prompt is a text,
or a conversation's turns before the answer (`Turn`s, ending with the user's); an answer is a
text either way (a conversation's answer is the assistant's next turn). Torch-free."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from adaptlab.data.answer_text import normalize_answer
from adaptlab.data.generative import SplitCorpus, Turn
from adaptlab.data.splits import SPLIT_SEED
from adaptlab.data.types import SPLIT_NAMES, Origin
from adaptlab.errors import DataError

Prompt = str | tuple[Turn, ...]
"""A text, or the turns of a conversation up to the assistant's answer."""

PAIR_SEED = SPLIT_SEED
"""The seed of a built-in pair corpus's rejected answers (one generator per split)."""
PREFERENCE_SHAPES = ("preference", "unpaired", "prompt-only")
"""How preference-family data files are read: prompt / chosen / rejected, prompt /
completion / label, or prompt (with an optional reference answer)."""


@dataclass(frozen=True)
class Preference:
    """A prompt, the answer preferred and the one rejected (never equal)."""

    prompt: Prompt
    chosen: str
    rejected: str


@dataclass(frozen=True)
class Judged:
    """A prompt and one answer, judged desirable or not (KTO's unpaired data)."""

    prompt: Prompt
    completion: str
    desirable: bool


@dataclass(frozen=True)
class Question:
    """A prompt to answer, and the answer a verifiable reward checks against (None: the
    reward needs none, a format rule)."""

    prompt: Prompt
    answer: str | None = None


PreferenceExample = Preference | Judged | Question


def is_conversation(prompt: Prompt) -> bool:
    """Whether `prompt` is a conversation's turns rather than a text."""
    return not isinstance(prompt, str)


@dataclass(frozen=True)
class PreferenceCorpus(SplitCorpus[PreferenceExample]):
    """Preference-family examples (all `Preference`s, all `Judged` or all `Question`s) in
    fixed train / dev / test splits (see `SplitCorpus`)."""


def answered_as(prompt: Prompt, answer: str) -> str:
    """`answer` written as an answer to `prompt` is: stripped, and after a text prompt that
    does not end in a space, one space before it (as `cued` pairs write their completions), so
    a reference and a model's answer to one prompt are written alike."""
    text = answer.strip()
    if isinstance(prompt, str) and prompt and not prompt[-1].isspace():
        return f" {text}"
    return text


def pairs_from_answers(questions: Sequence[Question], answers: Sequence[str]) -> list[Preference]:
    """The pairs that correct a model where it was wrong: for each question whose `answers`
    entry (the model's generated answer, in order) differs from its reference under exact
    match's normalisation (`normalize_answer`), the reference chosen and the model's answer
    rejected, both written by `answered_as`. A blank answer gives no pair (a pair compares two
    answers); a question without a reference is an error."""
    if len(questions) != len(answers):
        raise DataError(
            f"{len(questions)} questions but {len(answers)} answers; give one answer per question"
        )
    pairs = []
    for number, (question, answer) in enumerate(zip(questions, answers, strict=True), start=1):
        if question.answer is None or not question.answer.strip():
            raise DataError(
                f"question {number} has no reference answer; pairs need the right answer to "
                "prefer (give questions with answers)"
            )
        if not answer.strip() or normalize_answer(answer) == normalize_answer(question.answer):
            continue
        prompt = question.prompt
        pairs.append(
            Preference(prompt, answered_as(prompt, question.answer), answered_as(prompt, answer))
        )
    return pairs


PairsOfSplit = Callable[[str, random.Random], Iterable[tuple["Preference", Origin | None]]]
"""What a built-in pair corpus makes of one split: its pairs with their origins, the rejected
answers picked with the split's own generator."""


def built_pairs(
    pairs_of: PairsOfSplit,
) -> tuple[dict[str, tuple[Preference, ...]], dict[str, tuple[Origin | None, ...]]]:
    """Each split's pairs and origins as `pairs_of` makes them, handed a generator seeded with
    `PAIR_SEED` per split (a split's picks do not depend on another's)."""
    splits, origins = {}, {}
    for split in SPLIT_NAMES:
        made = list(pairs_of(split, random.Random(PAIR_SEED)))
        splits[split] = tuple(pair for pair, _ in made)
        origins[split] = tuple(origin for _, origin in made)
    return splits, origins


def pick_other(rng: random.Random, right: str, pool: Sequence[str]) -> str | None:
    """A value of `pool` picked with `rng` that is not `right` under exact match's
    normalisation (None: the pool holds none), for a built-in's rejected answers."""
    wrong = normalize_answer(right)
    others = [value for value in pool if normalize_answer(value) != wrong]
    return rng.choice(others) if others else None
