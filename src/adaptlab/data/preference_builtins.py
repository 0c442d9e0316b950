"""The built-in preference-family corpora by name, made offline from the built-in generative
and labelled corpora (and, for `arithmetic`, from nothing): pairs, judged answers and
questions with fixed splits (sizes, split rules and what each pair type teaches in
docs/data.md). Each loads only when asked for."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from adaptlab.data.arithmetic import NAME as ARITHMETIC
from adaptlab.data.arithmetic import SUMMARY as ARITHMETIC_SUMMARY
from adaptlab.data.arithmetic import load_arithmetic
from adaptlab.data.countries_pairs import (
    PAIRS,
    PAIRS_SUMMARY,
    QUESTIONS_NAME,
    QUESTIONS_SUMMARY,
    UNPAIRED,
    UNPAIRED_SUMMARY,
    load_countries_pairs,
    load_countries_questions,
    load_countries_unpaired,
)
from adaptlab.data.friends_pairs import NAME as FRIENDS_PAIRS
from adaptlab.data.friends_pairs import SUMMARY as FRIENDS_SUMMARY
from adaptlab.data.friends_pairs import load_friends_pairs
from adaptlab.data.generative import copied_on_load, without_tasks
from adaptlab.data.instruction_pairs import PAIRS_SUFFIX, load_instruction_pairs, summary
from adaptlab.data.label_instructions import PHRASINGS
from adaptlab.data.label_kind import LabelledTasks
from adaptlab.data.preference import PreferenceCorpus

Load = Callable[[LabelledTasks], PreferenceCorpus]
"""What loads a built-in: the labelled tasks read the labelled corpus it is made of, if any."""


INSTRUCTION_PAIRS = [f"{name}{PAIRS_SUFFIX}" for name in PHRASINGS]

PREFERENCE_BUILTINS: dict[str, Load] = {
    PAIRS: copied_on_load(without_tasks(load_countries_pairs)),
    UNPAIRED: copied_on_load(without_tasks(load_countries_unpaired)),
    QUESTIONS_NAME: copied_on_load(without_tasks(load_countries_questions)),
    FRIENDS_PAIRS: copied_on_load(without_tasks(load_friends_pairs)),
    ARITHMETIC: copied_on_load(without_tasks(load_arithmetic)),
    **{
        f"{name}{PAIRS_SUFFIX}": copied_on_load(partial(load_instruction_pairs, name))
        for name in PHRASINGS
    },
}
"""Each built-in preference-family corpus's name and the function that loads it."""

PREFERENCE_SHAPES_HELD: dict[str, str] = {
    PAIRS: "preference",
    UNPAIRED: "unpaired",
    QUESTIONS_NAME: "prompt-only",
    FRIENDS_PAIRS: "preference",
    ARITHMETIC: "prompt-only",
    **dict.fromkeys(INSTRUCTION_PAIRS, "preference"),
}
"""What each built-in holds, known without loading it: pairs, judged answers or questions."""

PREFERENCE_SUMMARIES: dict[str, str] = {
    PAIRS: PAIRS_SUMMARY,
    UNPAIRED: UNPAIRED_SUMMARY,
    QUESTIONS_NAME: QUESTIONS_SUMMARY,
    FRIENDS_PAIRS: FRIENDS_SUMMARY,
    ARITHMETIC: ARITHMETIC_SUMMARY,
    **{f"{name}{PAIRS_SUFFIX}": summary(name) for name in PHRASINGS},
}
"""A line describing each built-in preference-family corpus, for listings."""


def preference_builtin_datasets() -> dict[str, str]:
    """Built-in preference-family corpus names with a one-line description each."""
    return dict(PREFERENCE_SUMMARIES)
