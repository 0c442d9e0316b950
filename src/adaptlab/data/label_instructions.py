"""`<name>-instructions`: a built-in single-label corpus phrased as instructions. The prompt is
the example's text and a question naming the choices, the completion the label's name; the
splits are the labelled corpus's own, example for example, so one data set can be learned with
a classification head or generatively and the two compared in one study.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from adaptlab.data.builtin import load_builtin
from adaptlab.data.generative import GenerativeCorpus, PromptCompletion, cued
from adaptlab.data.label_kind import LabelledTasks
from adaptlab.data.types import SPLIT_NAMES, Example

SUFFIX = "-instructions"


@dataclass(frozen=True)
class Phrasing:
    """How a corpus's examples are asked about: what a text is called (`Review`) and the
    question after it, whose `{choices}` become the label names (`fresh or rotten`)."""

    noun: str
    question: str


SENTIMENT_COMMENT = Phrasing(
    "Comment",
    "Is this news comment (in Slovenian) {choices}? Answer with one word.",
)
PHRASINGS: dict[str, Phrasing] = {
    "rotten-tomatoes": Phrasing("Review", "Is this review {choices}? Answer with one word."),
    "20newsgroups": Phrasing(
        "Post",
        "Which newsgroup was this post sent to: {choices}? Answer with the newsgroup's name.",
    ),
    "reuters-r8": Phrasing(
        "Article",
        "Which topic is this newswire article about: {choices}? Answer with one word.",
    ),
    "twitter-sentiment": Phrasing(
        "Tweet", "Is the sentiment of this tweet {choices}? Answer with one word."
    ),
    "slovenian-opinions": SENTIMENT_COMMENT,
    "slovenian-opinions-chronological": SENTIMENT_COMMENT,
    "slovenian-opinions-topic": Phrasing(
        "Comment",
        "Which topic is this news comment (in Slovenian) about: {choices}? Answer with one word.",
    ),
}
"""The built-in single-label corpora that have an instructions corpus, and their phrasing."""


def choices(names: Sequence[str]) -> str:
    """Label names as a question lists them: `a or b`, `a, b or c`."""
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"


def instruction(example: Example, names: Sequence[str], phrasing: Phrasing) -> PromptCompletion:
    """One labelled example as a prompt (text, then the question) and its label's name."""
    assert isinstance(example.label, int)
    question = phrasing.question.format(choices=choices(names))
    return cued(f"{phrasing.noun}: {example.text}\n{question}", names[example.label])


def summary(name: str) -> str:
    """A listing's line for `<name>-instructions`."""
    return f"{name} as instructions: text and question, the label word the answer"


@lru_cache(maxsize=2)
def load_instructions(name: str, tasks: LabelledTasks) -> GenerativeCorpus:
    """`<name>-instructions` from the built-in labelled corpus `name` (one of PHRASINGS), read
    for its task among `tasks`."""
    data = load_builtin(name, tasks, None)
    phrasing, names = PHRASINGS[name], data.label_names
    splits = {
        split: tuple(instruction(example, names, phrasing) for example in data.splits[split])
        for split in SPLIT_NAMES
    }
    origins = {
        split: tuple(example.origin for example in data.splits[split]) for split in SPLIT_NAMES
    }
    question = phrasing.question.format(choices=choices(names))
    description = (
        f"built-in {name}{SUFFIX}: {name} as instructions ({phrasing.noun}: the text, then "
        f"'{question}'), the label's name the completion, in the splits of {data.description}"
    )
    return GenerativeCorpus(f"{name}{SUFFIX}", splits, description, origins)
