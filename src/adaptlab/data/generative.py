"""The records of generative data: a prompt and its completion, or a conversation of turns, in
fixed train / dev / test splits (`GenerativeCorpus`). Torch-free, so records and reports import
them freely; files are read by `adaptlab.data.generative_loading`, examples tokenised by
`adaptlab.data.generative_encoding`."""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Generic, TypeVar

from adaptlab.data.label_kind import LabelledTasks
from adaptlab.data.splits import sample_train_and_dev
from adaptlab.data.types import Origin
from adaptlab.errors import DataError

ROLES = ("system", "user", "assistant")
"""The roles a conversation's turns may have."""
SHAPES = ("prompt-completion", "messages")
"""How generative data files are read: prompt and completion columns (or the Alpaca triple
instruction / input / output), or OpenAI-style `messages`."""


@dataclass(frozen=True)
class Turn:
    """One message of a conversation: its role (system, user or assistant) and its text."""

    role: str
    content: str


@dataclass(frozen=True)
class PromptCompletion:
    """A prompt and the completion a model learns to write after it."""

    prompt: str
    completion: str


def cued(prompt: str, answer: str, cue: str = "Answer:") -> PromptCompletion:
    """A built-in corpus's pair: the prompt ends with a line `cue` and the completion starts
    with a space, so the answer's first word is tokenised as in running text and a base model
    (not only one tuned on chats) reads where the answer goes."""
    return PromptCompletion(f"{prompt}\n{cue}", f" {answer}")


@dataclass(frozen=True)
class Conversation:
    """A chat: an optional system turn, then user and assistant turns in alternation (at least
    one assistant turn; see `check_conversation`)."""

    turns: tuple[Turn, ...]


GenerativeExample = PromptCompletion | Conversation

Item = TypeVar("Item")


@dataclass(frozen=True)
class SplitCorpus(Generic[Item]):
    """Examples of one kind in fixed train / dev / test splits, and how they were made;
    `origins` holds where each example came from (split by split, in the same order), or None
    where that was not kept. Generative, preference and text corpora are its kinds; sampling,
    capping the test split and splitting files serve them all."""

    name: str
    splits: Mapping[str, tuple[Item, ...]]
    description: str
    origins: Mapping[str, tuple[Origin | None, ...]] | None = None


@dataclass(frozen=True)
class GenerativeCorpus(SplitCorpus[GenerativeExample]):
    """Generative examples (prompt-completion pairs or chats) in fixed train / dev / test
    splits (see `SplitCorpus`)."""


CorpusT = TypeVar("CorpusT", bound="SplitCorpus[Any]")
"""A corpus of any kind, handed back as the same kind."""


def copied_on_load(
    load: Callable[[LabelledTasks], CorpusT],
) -> Callable[[LabelledTasks], CorpusT]:
    """`load` of a built-in, its (cached) corpus handed out with split dicts of its own, so a
    caller that changes them leaves the next caller's corpus as it was."""

    def fresh(tasks: LabelledTasks) -> CorpusT:
        corpus = load(tasks)
        origins = None if corpus.origins is None else dict(corpus.origins)
        return replace(corpus, splits=dict(corpus.splits), origins=origins)

    return fresh


def without_tasks(load: Callable[[], CorpusT]) -> Callable[[LabelledTasks], CorpusT]:
    """`load`, of a built-in made of no labelled corpus, taking the labelled tasks a built-in
    made of one reads (unused)."""
    return lambda tasks: load()


def check_conversation(turns: Sequence[Turn], where: str) -> None:
    """Fail in one line naming `where` unless `turns` are a chat adaptlab trains on: a system
    turn only first, then user and assistant alternating from a user turn, at least one
    non-empty assistant turn (the last turn may be either)."""
    previous = "system"
    for number, turn in enumerate(turns, start=1):
        if turn.role not in ROLES:
            raise DataError(
                f"{where}: message {number} has role {turn.role!r}; roles are {', '.join(ROLES)}"
            )
        if turn.role == "system" and number > 1:
            raise DataError(
                f"{where}: message {number} is a system message; only the first message may be one"
            )
        expected = "assistant" if previous == "user" else "user"
        if number > 1 or turn.role != "system":
            if turn.role != expected:
                after = f"after {previous}" if number > 1 else "as the chat's first message"
                raise DataError(
                    f"{where}: message {number} is {turn.role} {after}; user and "
                    "assistant messages alternate, starting with user (after an optional "
                    "system message)"
                )
            previous = turn.role
        if turn.role == "assistant" and not turn.content.strip():
            raise DataError(
                f"{where}: message {number} (assistant) is empty; write its answer or delete "
                "that chat"
            )
    if not any(turn.role == "assistant" for turn in turns):
        raise DataError(
            f"{where} has no assistant message; a chat needs at least one to learn from"
        )


def sample_corpus(corpus: CorpusT, train_size: int, seed: int, unit: str = "examples") -> CorpusT:
    """`train_size` training items sampled with `seed`, as many dev (or all there are); the
    test split is kept. `unit` names the items in messages and the description."""
    train = corpus.splits["train"]
    if isinstance(train_size, bool) or not 1 <= train_size <= len(train):
        raise DataError(
            f"train_size {train_size} does not fit the {len(train)} training {unit} of "
            f"{corpus.name}; pick 1 to {len(train)}"
        )
    splits, origins = sample_train_and_dev(corpus.splits, corpus.origins, train_size, seed)
    note = f" Sampled with seed {seed}: {train_size} train, {len(splits['dev'])} dev {unit}."
    return replace(corpus, splits=splits, description=corpus.description + note, origins=origins)


def capped_test(corpus: CorpusT, size: int, seed: int) -> CorpusT:
    """`corpus` with at most `size` test examples, sampled with `seed` (kept in their order)."""
    test = corpus.splits["test"]
    if size >= len(test):
        return corpus
    kept = sorted(random.Random(seed).sample(range(len(test)), size))
    origins = corpus.origins
    if origins is not None:
        origins = {**origins, "test": tuple(origins["test"][i] for i in kept)}
    note = f" Test capped to {size} examples (seed {seed})."
    splits = {**corpus.splits, "test": tuple(test[i] for i in kept)}
    return replace(corpus, splits=splits, description=corpus.description + note, origins=origins)
