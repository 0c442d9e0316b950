"""Preference-family data in TRL's formats: pairs (text, conversational, implicit prompt),
unpaired judged answers and prompt-only questions from JSONL, CSV and TSV files; one file split
80/10/10, a folder's own splits; every bad row one line naming the file and the line, nothing
written. The built-ins made offline (sizes and invariants under the `real` marker, how each is
made on made-up records), and `pairs_from_answers`."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from cli_cases import unchanged
from generative_helpers import write_jsonl, write_table

from adaptlab.data.answer_text import normalize_answer
from adaptlab.data.arithmetic import OPERATIONS, arithmetic_questions, load_arithmetic
from adaptlab.data.countries_pairs import countries_pairs, questions, relation_of, unpaired
from adaptlab.data.countries_qa import countries_corpus
from adaptlab.data.friends_pairs import friends_pairs
from adaptlab.data.generative import (
    Conversation,
    GenerativeCorpus,
    PromptCompletion,
    Turn,
    capped_test,
    check_conversation,
    cued,
    sample_corpus,
)
from adaptlab.data.instruction_pairs import instruction_pairs
from adaptlab.data.preference import (
    PREFERENCE_SHAPES,
    Judged,
    Preference,
    PreferenceCorpus,
    Question,
    pairs_from_answers,
)
from adaptlab.data.preference_builtins import (
    PREFERENCE_BUILTINS,
    PREFERENCE_SHAPES_HELD,
    PREFERENCE_SUMMARIES,
    preference_builtin_datasets,
)
from adaptlab.data.preference_loading import load_preferences as load
from adaptlab.data.preference_rows import READ
from adaptlab.data.splits import carve_dev, three_way_split
from adaptlab.data.types import SPLIT_NAMES, Origin
from adaptlab.errors import AdaptlabError, ConfigError, DataError
from adaptlab.tasks.registry import LABELLED

SYSTEM = {"role": "system", "content": "Be brief."}


def user(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


def assistant(text: str) -> dict[str, str]:
    return {"role": "assistant", "content": text}


def load_preferences(source: str, **options: Any) -> PreferenceCorpus:
    return load(source, LABELLED, **options)


def text_pair(i: int) -> dict[str, Any]:
    return {"prompt": f"question {i}?", "chosen": f" right {i}", "rejected": f" wrong {i}"}


def chat_pair(i: int) -> dict[str, Any]:
    return {
        "prompt": [SYSTEM, user(f"hello {i}")],
        "chosen": [assistant(f"hi {i}")],
        "rejected": [assistant(f"go away {i}")],
    }


def implicit_pair(i: int) -> dict[str, Any]:
    shared = [user(f"hello {i}"), assistant("hi"), user("how are you?")]
    return {"chosen": [*shared, assistant("well")], "rejected": [*shared, assistant(f"no {i}")]}


def text_judged(i: int) -> dict[str, Any]:
    return {"prompt": f"question {i}?", "completion": f" answer {i}", "label": i % 2 == 0}


def chat_judged(i: int) -> dict[str, Any]:
    return {"prompt": [user(f"hello {i}")], "completion": [assistant(f"hi {i}")], "label": True}


def text_question(i: int) -> dict[str, Any]:
    return {"prompt": f"What is {i} + 1?", "answer": str(i + 1)}


def chat_question(i: int) -> dict[str, Any]:
    return {"prompt": [SYSTEM, user(f"What is {i} + 1?")]}


GOOD = {
    "preference": text_pair,
    "conversational": chat_pair,
    "implicit": implicit_pair,
    "unpaired": text_judged,
    "unpaired-chat": chat_judged,
    "prompt-only": text_question,
    "prompt-only-chat": chat_question,
}
"""A good record of each way a file may be written."""
SHAPE = {"conversational": "preference", "implicit": "preference"}


def shape_of(kind: str) -> str:
    return SHAPE.get(kind, kind.removesuffix("-chat"))


def everything(corpus: PreferenceCorpus) -> list[Any]:
    return [example for split in SPLIT_NAMES for example in corpus.splits[split]]


# Reading each format


def test_text_pairs_split_80_10_10_and_keep_origins(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "pairs.jsonl", [text_pair(i) for i in range(30)])
    corpus = load_preferences(str(path), shape="preference")
    for split, ids in zip(SPLIT_NAMES, three_way_split([None] * 30), strict=True):
        assert corpus.splits[split] == tuple(
            Preference(f"question {i}?", f" right {i}", f" wrong {i}") for i in ids
        )
        assert corpus.origins is not None
        assert corpus.origins[split] == tuple(Origin("pairs.jsonl", i + 1) for i in ids)
    assert isinstance(corpus, PreferenceCorpus) and corpus.name == "pairs"
    assert "80/10/10" in corpus.description and "train 25, dev 3, test 2" in corpus.description


@pytest.mark.parametrize("suffix", (".csv", ".tsv"))
def test_tables_read_text_pairs_and_named_columns(tmp_path: Path, suffix: str) -> None:
    rows = [[f"q{i}", f"good {i}\nline two", f"bad {i}", "x"] for i in range(20)]
    header = ["question", "chosen", "rejected", "score"]
    path = write_table(tmp_path / f"pairs{suffix}", header, rows)
    corpus = load_preferences(str(path), shape="preference", prompt_column="question")
    assert Preference("q0", "good 0\nline two", "bad 0") in everything(corpus)
    assert corpus.origins is not None and Origin(path.name, 2) in corpus.origins["train"]


def test_conversational_pairs_keep_the_prompt_turns(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "chats.jsonl", [chat_pair(i) for i in range(20)])
    corpus = load_preferences(str(path), shape="preference")
    expected = Preference(
        (Turn("system", "Be brief."), Turn("user", "hello 0")), "hi 0", "go away 0"
    )
    assert expected in everything(corpus)
    assert all(isinstance(pair.prompt, tuple) for pair in everything(corpus))


def test_an_implicit_prompt_is_the_turns_chosen_and_rejected_share(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "implicit.jsonl", [implicit_pair(i) for i in range(20)])
    corpus = load_preferences(str(path), shape="preference")
    prompt = (Turn("user", "hello 3"), Turn("assistant", "hi"), Turn("user", "how are you?"))
    assert Preference(prompt, "well", "no 3") in everything(corpus)


def test_unpaired_rows_read_json_bools_and_table_words(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "kto.jsonl", [text_judged(i) for i in range(20)])
    corpus = load_preferences(str(path), shape="unpaired")
    assert Judged("question 0?", " answer 0", True) in everything(corpus)
    assert Judged("question 1?", " answer 1", False) in everything(corpus)
    words = ["true", "False", " TRUE "]
    rows = [[f"q{i}", f"a{i}", words[i % 3]] for i in range(20)]
    table = write_table(tmp_path / "kto.tsv", ["prompt", "completion", "label"], rows)
    judged = {
        e.prompt: e.desirable for e in everything(load_preferences(str(table), shape="unpaired"))
    }
    assert (judged["q0"], judged["q1"], judged["q2"]) == (True, False, True)
    chats = write_jsonl(tmp_path / "kto-chat.jsonl", [chat_judged(i) for i in range(20)])
    assert Judged((Turn("user", "hello 0"),), "hi 0", True) in everything(
        load_preferences(str(chats), shape="unpaired")
    )


def test_prompt_only_rows_read_an_answer_when_the_file_has_one(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "q.jsonl", [text_question(i) for i in range(20)])
    assert Question("What is 4 + 1?", "5") in everything(
        load_preferences(str(path), shape="prompt-only")
    )
    chats = write_jsonl(tmp_path / "chat-q.jsonl", [chat_question(i) for i in range(20)])
    asked = everything(load_preferences(str(chats), shape="prompt-only"))
    assert Question((Turn("system", "Be brief."), Turn("user", "What is 4 + 1?"))) in asked
    rows = [[f"q{i}", str(i)] for i in range(20)]
    table = write_table(tmp_path / "q.csv", ["question", "solution"], rows)
    read = load_preferences(
        str(table), shape="prompt-only", prompt_column="question", answer_column="solution"
    )
    assert Question("q7", "7") in everything(read)
    without = load_preferences(str(table), shape="prompt-only", prompt_column="question")
    assert all(question.answer is None for question in everything(without))


def test_a_folder_keeps_its_splits_or_carves_dev_from_train(tmp_path: Path) -> None:
    folder = tmp_path / "splits"
    folder.mkdir()
    write_jsonl(folder / "train.jsonl", [text_pair(i) for i in range(20)])
    write_table(folder / "test.csv", ["prompt", "chosen", "rejected"], [["t?", "yes", "no"]])
    corpus = load_preferences(str(folder), shape="preference")
    train_at, dev_at = carve_dev([None] * 20)
    assert corpus.splits["dev"] == tuple(
        Preference(f"question {i}?", f" right {i}", f" wrong {i}") for i in dev_at
    )
    assert len(corpus.splits["train"]) == len(train_at) == 19
    assert corpus.splits["test"] == (Preference("t?", "yes", "no"),)
    assert corpus.origins is not None and corpus.origins["test"] == (Origin("test.csv", 2),)
    write_jsonl(folder / "dev.jsonl", [text_pair(i) for i in range(2)])
    given = load_preferences(str(folder), shape="preference")
    assert [len(given.splits[s]) for s in SPLIT_NAMES] == [20, 2, 1]
    assert "splits as given" in given.description
    write_jsonl(folder / "train.csv", [])
    with unchanged(tmp_path), pytest.raises(DataError, match="several train files"):
        load_preferences(str(folder), shape="preference")


def test_sampling_and_capping_serve_preference_corpora(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "pairs.jsonl", [text_pair(i) for i in range(100)])
    corpus = load_preferences(str(path), shape="preference")
    small = capped_test(sample_corpus(corpus, 5, seed=3), 4, seed=1)
    assert isinstance(small, PreferenceCorpus)
    assert [len(small.splits[s]) for s in SPLIT_NAMES] == [5, 5, 4]
    assert set(small.splits["train"]) <= set(corpus.splits["train"])
    assert small.origins is not None and len(small.origins["test"]) == 4


# Bad rows


def bad_row(tmp_path: Path, kind: str, line: Any, *needles: str, suffix: str = ".jsonl") -> str:
    """Twenty good rows of `kind` and `line`: the error is one line naming the file and the
    bad line (21 in JSONL, 22 in a table below its header) and `needles`; nothing written."""
    path = tmp_path / f"data{suffix}"
    if suffix == ".jsonl":
        good = [json.dumps(GOOD[kind](i)) for i in range(20)]
        bad = line if isinstance(line, str) else json.dumps(line)
        path.write_text("\n".join([*good, bad]) + "\n", encoding="utf-8")
        where = f"{path} line 21"
    else:
        header = list(GOOD[kind](0))
        rows = [
            [str(v).lower() if isinstance(v, bool) else v for v in GOOD[kind](i).values()]
            for i in range(20)
        ]
        write_table(path, header, [*rows, line])
        where = f"{path} line 22"
    with unchanged(tmp_path), pytest.raises(AdaptlabError) as error:
        load_preferences(str(path), shape=shape_of(kind))
    message = str(error.value)
    assert "\n" not in message, message
    for needle in (where, *needles):
        assert needle in message, (needle, message)
    return message


BAD_ROWS: dict[str, tuple[str, Any, tuple[str, ...]]] = {
    "no rejected": ("preference", {"prompt": "q", "chosen": "a"}, ("column 'rejected' not found",)),
    "no chosen": ("preference", {"prompt": "q", "rejected": "a"}, ("column 'chosen' not found",)),
    "blank rejected": ("preference", {**text_pair(1), "rejected": "  "}, ("empty 'rejected'",)),
    "empty chosen": ("preference", {**text_pair(1), "chosen": ""}, ("empty 'chosen'",)),
    "same answers": (
        "preference",
        {"prompt": "q", "chosen": " same", "rejected": "same "},
        ("same answer",),
    ),
    "empty prompt": ("preference", {**text_pair(1), "prompt": " \n"}, ("empty 'prompt'",)),
    "chosen a number": (
        "preference",
        {**text_pair(1), "chosen": 3},
        ("'chosen' is 3, not a string",),
    ),
    "prompt null": ("preference", {**text_pair(1), "prompt": None}, ("'prompt' is None",)),
    "messages in a text file": (
        "preference",
        {**text_pair(1), "prompt": [user("hi")]},
        ("'prompt' is a list", "line 1", "write every row alike"),
    ),
    "not json": ("preference", '{"prompt": "q",', ("not valid JSON",)),
    "a key twice": ("preference", '{"prompt": "q", "prompt": "r"}', ("'prompt' more than once",)),
    "prompt ends with the assistant": (
        "conversational",
        {**chat_pair(1), "prompt": [user("hi"), assistant("hello")]},
        ("last message of 'prompt' (2) is assistant",),
    ),
    "prompt starts with the assistant": (
        "conversational",
        {**chat_pair(1), "prompt": [assistant("hi"), user("hello")]},
        ("message 1 is assistant",),
    ),
    "system not first": (
        "conversational",
        {**chat_pair(1), "prompt": [user("hi"), SYSTEM, user("hello")]},
        ("only the first message may be",),
    ),
    "empty prompt messages": ("conversational", {**chat_pair(1), "prompt": []}, ("empty list",)),
    "blank user message": (
        "conversational",
        {**chat_pair(1), "prompt": [user("  ")]},
        ("last message of 'prompt' (user) is empty",),
    ),
    "chosen by the user": (
        "conversational",
        {**chat_pair(1), "chosen": [user("hi")]},
        ("last message of 'chosen' is user, not the assistant's",),
    ),
    "two messages chosen": (
        "conversational",
        {**chat_pair(1), "chosen": [assistant("a"), assistant("b")]},
        ("'chosen' holds 2 messages",),
    ),
    "empty assistant answer": (
        "conversational",
        {**chat_pair(1), "rejected": [assistant(" ")]},
        ("answer in 'rejected' (assistant) is empty",),
    ),
    "text answer in a chat file": (
        "conversational",
        {**chat_pair(1), "chosen": "hi"},
        ("'chosen' is a string", "write every row alike"),
    ),
    "same chat answers": (
        "conversational",
        {**chat_pair(1), "rejected": [assistant("hi 1")]},
        ("same answer",),
    ),
    "bad role": (
        "conversational",
        {**chat_pair(1), "prompt": [{"role": "bot", "content": "x"}]},
        ("role 'bot'",),
    ),
    "message with extra key": (
        "conversational",
        {**chat_pair(1), "chosen": [{**assistant("x"), "weight": 0}]},
        ("'weight', which is not read",),
    ),
    "implicit prompts differ": (
        "implicit",
        {"chosen": [user("a"), assistant("b")], "rejected": [user("c"), assistant("d")]},
        ("differ at message 1",),
    ),
    "implicit ends with the user": (
        "implicit",
        {"chosen": [user("a"), assistant("b"), user("c")], "rejected": [user("a"), assistant("d")]},
        ("last message of 'chosen' is user",),
    ),
    "implicit without a prompt": (
        "implicit",
        {"chosen": [assistant("b")], "rejected": [assistant("d")]},
        ("no prompt is shared",),
    ),
    "implicit prompt ends with the assistant": (
        "implicit",
        {
            "chosen": [user("a"), assistant("b"), assistant("c")],
            "rejected": [user("a"), assistant("b"), assistant("d")],
        },
        ("the prompt 'chosen' and 'rejected' share (2) is assistant",),
    ),
    "implicit text": ("implicit", {"chosen": "b", "rejected": "d"}, ("not a list of messages",)),
    "label a number": (
        "unpaired",
        {**text_judged(1), "label": 1},
        ("'label' is 1, not a JSON bool",),
    ),
    "label a string": ("unpaired", {**text_judged(1), "label": "true"}, ("not a JSON bool",)),
    "no label": ("unpaired", {"prompt": "q", "completion": "a"}, ("column 'label' not found",)),
    "empty completion": ("unpaired", {**text_judged(1), "completion": ""}, ("empty 'completion'",)),
    "completion of two": (
        "unpaired-chat",
        {**chat_judged(1), "completion": [assistant("a"), user("b")]},
        ("'completion' holds 2 messages",),
    ),
    "answer a number": (
        "prompt-only",
        {"prompt": "q", "answer": 5},
        ("'answer' is 5, not a string",),
    ),
    "no answer": (
        "prompt-only",
        {"prompt": "q"},
        ("column 'answer' not found", "every row needs one"),
    ),
    "empty question": ("prompt-only", {"prompt": "", "answer": "1"}, ("empty 'prompt'",)),
    "chat prompt by the assistant": (
        "prompt-only-chat",
        {"prompt": [user("a"), assistant("b")]},
        ("last message of 'prompt' (2) is assistant",),
    ),
}


@pytest.mark.parametrize("case", BAD_ROWS)
def test_a_bad_row_is_one_line_naming_its_line(tmp_path: Path, case: str) -> None:
    kind, line, needles = BAD_ROWS[case]
    bad_row(tmp_path, kind, line, *needles)


BAD_TABLE_ROWS: dict[str, tuple[str, list[str], tuple[str, ...]]] = {
    "same answers": ("preference", ["q", "same", " same"], ("same answer",)),
    "blank chosen": ("preference", ["q", " ", "no"], ("empty 'chosen'",)),
    "a field missing": ("preference", ["q", "yes"], ("has 2 fields, the header has 3",)),
    "label not a bool": ("unpaired", ["q", "a", "yes"], ("'label' is 'yes', not true or false",)),
}


@pytest.mark.parametrize("suffix", (".csv", ".tsv"))
@pytest.mark.parametrize("case", BAD_TABLE_ROWS)
def test_a_bad_table_row_is_one_line_naming_its_line(
    tmp_path: Path, case: str, suffix: str
) -> None:
    kind, row, needles = BAD_TABLE_ROWS[case]
    bad_row(tmp_path, kind, row, *needles, suffix=suffix)


def test_a_missing_column_names_the_columns_there_are(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "x.jsonl", [{"chosen": "a", "rejected": "b"}])
    with pytest.raises(DataError) as error:
        load_preferences(str(path), shape="preference")
    assert f"column 'prompt' not found in {path} line 1 (columns found: chosen, rejected)" in str(
        error.value
    )
    assert "implicit prompt" in str(error.value)
    table = write_table(tmp_path / "x.csv", ["prompt", "chosen"], [["q", "a"]])
    with pytest.raises(
        DataError,
        match=r"column 'rejected' not found in .*x\.csv \(columns found: prompt, chosen\)",
    ):
        load_preferences(str(table), shape="preference")
    with pytest.raises(DataError, match="column 'solution' not found"):
        load_preferences(str(table), shape="prompt-only", answer_column="solution")


def test_options_a_shape_does_not_read_and_unknown_sources_are_refused(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "pairs.jsonl", [text_pair(i) for i in range(20)])
    with pytest.raises(ConfigError, match="unknown preference data shape 'pairs'"):
        load_preferences(str(path), shape="pairs")
    with pytest.raises(ConfigError, match="label_column is not read for preference data"):
        load_preferences(str(path), shape="preference", label_column="y")
    with pytest.raises(ConfigError, match="prompt_column and chosen_column are both 'prompt'"):
        load_preferences(str(path), shape="preference", chosen_column="prompt")
    with pytest.raises(ConfigError, match="drop prompt_column"):
        load_preferences("countries-qa-pairs", shape="preference", prompt_column="q")
    with pytest.raises(
        ConfigError, match="holds preference data, not unpaired; read it as preference"
    ):
        load_preferences("countries-qa-pairs", shape="unpaired")
    with pytest.raises(DataError, match="unknown preference data source 'nowhere'.*arithmetic"):
        load_preferences("nowhere", shape="preference")
    (tmp_path / "pairs.json").write_text("{}")
    with pytest.raises(DataError, match="unknown data file extension '.json'"):
        load_preferences(str(tmp_path / "pairs.json"), shape="preference")


def test_reading_preference_data_loads_no_torch() -> None:
    code = (
        "import sys, adaptlab.data.preference_loading, adaptlab.data.preference_builtins; "
        "print(sorted({'torch', 'transformers'} & set(sys.modules)))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


# Built-ins, made from made-up records


REGIONS = ("Africa", "Asia", "Europe")


def country(index: int) -> dict[str, object]:
    return {
        "name": f"Land{index}",
        "capital": f"City{index}",
        "region": REGIONS[index % 3],
        "subregion": f"Sub{index % 5}",
        "currencies": ["EUR" if index % 2 else "USD"],
        "languages": ["fr", "en"] if index % 4 else ["de"],
    }


def test_countries_pairs_reject_another_country_of_the_split_for_the_same_relation() -> None:
    records = {f"land{i}.json": country(i) for i in range(40)}
    corpus = countries_corpus(list(records.items()))
    pairs = countries_pairs(corpus, records)
    assert pairs.origins is not None and corpus.origins is not None
    for split in SPLIT_NAMES:
        files = {origin.file for origin in corpus.origins[split] if origin}
        values: dict[str, set[str]] = {}
        for file in files:
            for key in ("capital", "region", "subregion"):
                values.setdefault(key, set()).add(str(records[file][key]))
        for pair, origin in zip(pairs.splits[split], pairs.origins[split], strict=True):
            assert isinstance(pair, Preference) and isinstance(pair.prompt, str)
            assert pair.prompt.endswith("\nAnswer:") and pair.rejected.startswith(" ")
            assert normalize_answer(pair.chosen) != normalize_answer(pair.rejected)
            assert origin is not None and origin.file in files
            relation = relation_of(str(records[origin.file]["name"]), pair.prompt)
            assert relation is not None
            if relation in values:
                assert pair.rejected.strip() in values[relation] - {pair.chosen.strip()}
    # every question has a wrong answer but the language one of a split where all speak one
    assert sum(map(len, pairs.splits.values())) <= sum(map(len, corpus.splits.values()))
    assert pairs == countries_pairs(corpus, records)  # seeded
    capital = cued("What is the capital of Land1?", "City1")
    assert any(p.prompt == capital.prompt and p.chosen == " City1" for p in everything(pairs))


def test_countries_unpaired_and_questions_follow_the_pairs_and_the_corpus() -> None:
    records = {f"land{i}.json": country(i) for i in range(40)}
    corpus = countries_corpus(list(records.items()))
    pairs = countries_pairs(corpus, records)
    judged = unpaired(pairs)
    for split in SPLIT_NAMES:
        assert len(judged.splits[split]) == 2 * len(pairs.splits[split])
        first, second = judged.splits[split][:2]
        pair = pairs.splits[split][0]
        assert first == Judged(pair.prompt, pair.chosen, True)  # type: ignore[union-attr]
        assert second == Judged(pair.prompt, pair.rejected, False)  # type: ignore[union-attr]
    asked = questions(corpus)
    example = corpus.splits["test"][0]
    assert isinstance(example, PromptCompletion)
    assert asked.splits["test"][0] == Question(example.prompt, example.completion.strip())


def test_friends_pairs_reject_the_same_characters_line_from_another_episode() -> None:
    def chat(character: str, episode: int, line: str) -> Conversation:
        system = (
            f"You are {character} in the TV series Friends, season 1, episode {episode}, "
            f'"The One {episode}". Reply as {character}.'
        )
        return Conversation(
            (Turn("system", system), Turn("user", "Joey: Hey."), Turn("assistant", line))
        )

    chats = tuple(
        chat(name, ep, f"{name} line {ep}") for ep in range(1, 5) for name in ("Ross", "Monica")
    )
    chats += (chat("Ross", 1, "Hi!"), chat("Ross", 2, "hi"))
    corpus = GenerativeCorpus("friends-chat", dict.fromkeys(SPLIT_NAMES, chats), "made up")
    pairs = friends_pairs(corpus)
    for pair, made in zip(pairs.splits["train"], chats, strict=True):
        assert isinstance(pair, Preference) and pair.prompt == made.turns[:-1]
        character = made.turns[0].content.split()[2]
        episode = made.turns[0].content.split("episode ")[1].split(",")[0]
        assert pair.rejected.startswith(character) or pair.rejected in ("Hi!", "hi")
        assert f"line {episode}" not in pair.rejected
        assert normalize_answer(pair.rejected) != normalize_answer(pair.chosen)
        check_conversation((*pair.prompt, Turn("assistant", pair.rejected)), "pair")
    unnamed = (Conversation((Turn("user", "a"), Turn("assistant", "b"))),)
    with pytest.raises(DataError, match="cannot read the character"):
        friends_pairs(GenerativeCorpus("x", dict.fromkeys(SPLIT_NAMES, unnamed), "x"))


def test_instruction_pairs_reject_another_label_word() -> None:
    made = tuple(cued(f"Review: r{i}\nIs this review a, b or c?", "abc"[i % 3]) for i in range(30))
    corpus = GenerativeCorpus("x-instructions", dict.fromkeys(SPLIT_NAMES, made), "made up")
    pairs = instruction_pairs(corpus, ("a", "b", "c"), "x-instructions-pairs")
    for pair, asked in zip(pairs.splits["dev"], made, strict=True):
        assert isinstance(pair, Preference)
        assert (pair.prompt, pair.chosen) == (asked.prompt, asked.completion)
        assert pair.rejected in (" a", " b", " c") and pair.rejected != pair.chosen
    assert len({pair.rejected for pair in pairs.splits["dev"]}) == 3  # seeded, not fixed
    with pytest.raises(DataError, match="needs two"):
        instruction_pairs(corpus, ("a",), "x-instructions-pairs")


def test_arithmetic_questions_are_seeded_distinct_and_right() -> None:
    made = arithmetic_questions()
    assert made == arithmetic_questions() and len(made) == 3000
    seen: set[tuple[str, frozenset[int]]] = set()
    for sign, question in made:
        assert isinstance(question.prompt, str) and question.answer is not None
        found = re.fullmatch(r"What is (\d+) (.) (\d+)\?\nAnswer:", question.prompt)
        assert found is not None and found[2] == sign
        first, second = int(found[1]), int(found[3])
        assert 1 <= first <= 99 and 1 <= second <= 99
        assert question.answer == str(OPERATIONS[sign](first, second))
        assert int(question.answer) >= 0
        seen.add((sign, frozenset((first, second))))
    assert len(seen) == 3000
    corpus = load_arithmetic()
    assert [len(corpus.splits[s]) for s in SPLIT_NAMES] == [2401, 300, 299]


def test_every_shape_says_what_it_reads() -> None:
    assert tuple(READ) == PREFERENCE_SHAPES


def test_every_builtin_declares_its_shape_and_a_line() -> None:
    listed = preference_builtin_datasets()
    assert set(listed) == set(PREFERENCE_BUILTINS) == set(PREFERENCE_SHAPES_HELD)
    assert set(PREFERENCE_SUMMARIES) == set(listed)
    assert all(line.strip() and "\n" not in line for line in listed.values())
    assert {"countries-qa-pairs", "friends-pairs", "arithmetic", "countries-qa-unpaired"} <= set(
        listed
    )
    assert "rotten-tomatoes-instructions-pairs" in listed
    for name, shape in PREFERENCE_SHAPES_HELD.items():
        if shape == "preference":
            assert "teaches" in listed[name] and (
                "not" in listed[name] or "nothing" in listed[name]
            )


# pairs_from_answers


def test_pairs_from_answers_keep_only_the_wrong_answers() -> None:
    asked = [
        Question("What is the capital of France?\nAnswer:", "Paris"),
        Question("What is 2 + 2?\nAnswer:", "4"),
        Question((Turn("user", "Capital of Peru?"),), "Lima"),
        Question("Which river?\nAnswer:", "The Nile"),
        Question("Blank?\nAnswer:", "x"),
    ]
    answers = [" paris.", "5", " Cusco\n", "nile", "  "]
    pairs = pairs_from_answers(asked, answers)
    assert pairs == [
        Preference("What is 2 + 2?\nAnswer:", " 4", " 5"),
        Preference((Turn("user", "Capital of Peru?"),), "Lima", "Cusco"),
    ]
    with pytest.raises(DataError, match="2 questions but 1 answers"):
        pairs_from_answers(asked[:2], answers[:1])
    with pytest.raises(DataError, match="question 1 has no reference answer"):
        pairs_from_answers([Question("q")], ["a"])


# The real built-ins


def sizes(corpus: PreferenceCorpus) -> tuple[int, ...]:
    return tuple(len(corpus.splits[split]) for split in SPLIT_NAMES)


EXPECTED = {
    "countries-qa-pairs": (2852, 358, 335),
    "countries-qa-unpaired": (5704, 716, 670),
    "countries-qa-questions": (2852, 358, 335),
    "friends-pairs": (13627, 1644, 1559),
    "arithmetic": (2401, 300, 299),
    "rotten-tomatoes-instructions-pairs": (10247, 1281, 1280),
    "slovenian-opinions-topic-instructions-pairs": (1393, 174, 173),
}


@pytest.mark.real
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_real_builtin_sizes_and_shapes(name: str) -> None:
    corpus = load_preferences(name, shape=PREFERENCE_SHAPES_HELD[name])
    assert corpus.name == name and sizes(corpus) == EXPECTED[name]
    if corpus.origins is not None:
        assert all(len(corpus.origins[s]) == len(corpus.splits[s]) for s in SPLIT_NAMES)
    for example in everything(corpus):
        if isinstance(example, Preference):
            assert normalize_answer(example.chosen) != normalize_answer(example.rejected)
            assert example.chosen.strip() and example.rejected.strip()
    corpus.splits["train"] = ()  # type: ignore[index]
    assert sizes(PREFERENCE_BUILTINS[name](LABELLED)) == EXPECTED[name]


def split_files(corpus: PreferenceCorpus) -> Mapping[str, set[str]]:
    assert corpus.origins is not None
    return {split: {o.file for o in corpus.origins[split] if o} for split in SPLIT_NAMES}


@pytest.mark.real
def test_real_countries_pairs_keep_dev_and_test_countries_out_of_training() -> None:
    pairs = load_preferences("countries-qa-pairs", shape="preference")
    files = split_files(pairs)
    assert (len(files["train"]), len(files["dev"]), len(files["test"])) == (203, 25, 24)
    assert not files["train"] & (files["dev"] | files["test"])
    capitals = {
        split: {pair.chosen for pair in pairs.splits[split] if "capital" in str(pair.prompt)}  # type: ignore[union-attr]
        for split in SPLIT_NAMES
    }
    rejected = {pair.rejected for pair in pairs.splits["train"]}  # type: ignore[union-attr]
    assert capitals["dev"] and capitals["test"] and rejected & capitals["train"]
    # rejected answers come from the same split (Belgrade is Serbia's and Serbia and
    # Montenegro's capital, in two splits)
    assert not rejected & (capitals["dev"] | capitals["test"]) - capitals["train"]
    prompt = cued("What is the capital of France?", "").prompt
    assert any(
        pair.prompt == prompt and pair.chosen == " Paris"  # type: ignore[union-attr]
        for pair in everything(pairs)
    )
    assert split_files(load_preferences("countries-qa-questions", shape="prompt-only")) == files


@pytest.mark.real
def test_real_friends_pairs_are_valid_conversations() -> None:
    pairs = load_preferences("friends-pairs", shape="preference")
    for split in SPLIT_NAMES:
        for number, pair in enumerate(pairs.splits[split]):
            assert isinstance(pair, Preference) and isinstance(pair.prompt, tuple)
            check_conversation((*pair.prompt, Turn("assistant", pair.chosen)), f"{split} {number}")
            assert pair.prompt[-1].role == "user"
