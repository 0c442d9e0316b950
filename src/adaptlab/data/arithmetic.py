"""`arithmetic`: questions made here, with a fixed seed, that a verifiable reward checks
(GRPO): `What is 37 + 48?` then a line `Answer:` (as `cued` prompts end), the reference
answer `85`. `PER_OPERATION` questions each of addition, subtraction and multiplication of
two numbers from 1 to 99, no two of one operation on the same two numbers (in either order);
a difference is written larger number first, so no answer is negative. Split 80/10/10 by the
fixed rule (seed 0), stratified by operation."""

from __future__ import annotations

import random
from collections.abc import Callable
from functools import lru_cache
from itertools import combinations_with_replacement

from adaptlab.data.generative import cued
from adaptlab.data.preference import PreferenceCorpus, Question
from adaptlab.data.splits import SPLIT_SEED, three_way_split
from adaptlab.data.types import SPLIT_NAMES

NAME = "arithmetic"
SEED = 0
PER_OPERATION = 1000
NUMBERS = range(1, 100)
OPERATIONS: dict[str, Callable[[int, int], int]] = {
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "x": lambda a, b: a * b,
}
"""Each operation's sign as the question writes it, and what it computes."""
SUMMARY = (
    f"{len(OPERATIONS) * PER_OPERATION} questions of +, - and x on numbers 1-99 made with a "
    "fixed seed, the result the reference (for a verifiable reward)"
)


def arithmetic_questions(
    seed: int = SEED, per_operation: int = PER_OPERATION
) -> list[tuple[str, Question]]:
    """`per_operation` questions of each operation (with its sign), picked with `seed` among
    the unordered pairs of NUMBERS, in operation order."""
    rng = random.Random(seed)
    pairs = list(combinations_with_replacement(NUMBERS, 2))
    made: list[tuple[str, Question]] = []
    for sign, compute in OPERATIONS.items():
        for low, high in rng.sample(pairs, per_operation):
            first, second = (high, low) if sign == "-" or rng.random() < 0.5 else (low, high)
            asked = cued(f"What is {first} {sign} {second}?", "").prompt
            made.append((sign, Question(asked, str(compute(first, second)))))
    return made


@lru_cache(maxsize=1)
def load_arithmetic() -> PreferenceCorpus:
    """`arithmetic`, made once per process."""
    made = arithmetic_questions()
    parts = three_way_split([sign for sign, _ in made])
    splits = {
        split: tuple(made[index][1] for index in indices)
        for split, indices in zip(SPLIT_NAMES, parts, strict=True)
    }
    sizes = "/".join(str(len(part)) for part in parts)
    description = (
        f"built-in {NAME}: {SUMMARY}; {PER_OPERATION} per operation, seed {SEED}, no two of "
        f"one operation on the same numbers, differences never negative; split 80/10/10 "
        f"({sizes}; stratified by operation, seed {SPLIT_SEED})"
    )
    return PreferenceCorpus(NAME, splits, description)
