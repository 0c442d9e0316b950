"""`<name>-instructions-pairs`: a built-in single-label corpus's instructions
(`adaptlab.data.label_instructions`) as preference pairs: the prompt as the instructions write
it, the right label word chosen and another label word of the same task rejected (picked with
a fixed seed; in a two-label task, the other one), in the labelled corpus's own splits."""

from __future__ import annotations

import random
from collections.abc import Sequence
from functools import lru_cache

from adaptlab.data.builtin import load_builtin
from adaptlab.data.generative import GenerativeCorpus, PromptCompletion
from adaptlab.data.label_instructions import SUFFIX, load_instructions
from adaptlab.data.label_kind import LabelledTasks
from adaptlab.data.preference import PAIR_SEED, Preference, PreferenceCorpus, pick_other
from adaptlab.data.types import SPLIT_NAMES
from adaptlab.errors import DataError

PAIRS_SUFFIX = f"{SUFFIX}-pairs"
TEACHES = (
    "teaches the task's decision as a preference of one label word over another; it teaches "
    "nothing a classifier on the same labels would not (with two labels the rejected word is "
    "fixed by the chosen one), and nothing about writing free text"
)


def summary(name: str) -> str:
    """A listing's line for `<name>-instructions-pairs`."""
    return (
        f"{name} as instructions, the right label word chosen and a wrong one rejected: "
        "teaches the decision, nothing beyond classification"
    )


def instruction_pairs(
    corpus: GenerativeCorpus, label_names: Sequence[str], name: str
) -> PreferenceCorpus:
    """The pairs of an instructions corpus whose completions are ` <label name>`."""
    splits, origins = {}, {}
    for split in SPLIT_NAMES:
        rng = random.Random(PAIR_SEED)
        pairs = []
        for example in corpus.splits[split]:
            if not isinstance(example, PromptCompletion):
                raise DataError(f"{corpus.name} holds {example!r}, not an instruction")
            wrong = pick_other(rng, example.completion, label_names)
            if wrong is None:
                raise DataError(f"{corpus.name} has one label; {name} needs two to compare")
            pairs.append(Preference(example.prompt, example.completion, f" {wrong}"))
        splits[split] = tuple(pairs)
        if corpus.origins is not None:
            origins[split] = corpus.origins[split]
    description = (
        f"built-in {name}: {corpus.description}; the label's name chosen and another of "
        f"{len(label_names)} label names rejected (seed {PAIR_SEED}); {TEACHES}"
    )
    return PreferenceCorpus(name, splits, description, origins or None)


@lru_cache(maxsize=2)
def load_instruction_pairs(name: str, tasks: LabelledTasks) -> PreferenceCorpus:
    """`<name>-instructions-pairs` from the built-in labelled corpus `name`, read for its task
    among `tasks`."""
    names = load_builtin(name, tasks, None).label_names
    return instruction_pairs(load_instructions(name, tasks), names, f"{name}{PAIRS_SUFFIX}")
