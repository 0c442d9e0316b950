"""Generative data from files: prompt-completion columns (CSV, TSV, JSONL, any names), the
Alpaca triple, OpenAI-style messages; the fixed 80/10/10 split of one file, a folder's own
splits, origins kept; a built-in name looked up; sampling. Every bad row is one line naming
the file and the line, and nothing is written anywhere."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cli_cases import unchanged
from generative_helpers import write_jsonl, write_table

import adaptlab.data.generative_loading as generative_loading
from adaptlab.data.generative import (
    Conversation,
    GenerativeCorpus,
    PromptCompletion,
    Turn,
    sample_corpus,
)
from adaptlab.data.generative_builtins import GENERATIVE_BUILTINS, GENERATIVE_SHAPES
from adaptlab.data.splits import carve_dev, three_way_split
from adaptlab.data.types import SPLIT_NAMES, Origin
from adaptlab.errors import AdaptlabError, ConfigError, DataError
from adaptlab.tasks.registry import LABELLED

PC = "prompt-completion"


def load_generative(source: str, **options: Any) -> GenerativeCorpus:
    """`source` read as `generative_loading.load_generative` reads it for a run."""
    return generative_loading.load_generative(source, LABELLED, **options)


@pytest.fixture
def work(tmp_path: Path) -> Iterator[Path]:
    """A folder that no test may change by failing."""
    yield tmp_path


def pairs(count: int) -> list[dict[str, str]]:
    return [{"prompt": f"question {i}?", "completion": f" answer {i}"} for i in range(count)]


def chat(i: int) -> dict[str, Any]:
    return {
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": f"hello {i}"},
            {"role": "assistant", "content": f"hi {i}"},
        ]
    }


def test_one_jsonl_file_splits_80_10_10_by_the_fixed_rule_and_keeps_origins(work: Path) -> None:
    records = pairs(30)
    path = work / "qa.jsonl"
    path.write_text("\n" + "".join(json.dumps(r) + "\n\n" for r in records))  # blank lines
    corpus = load_generative(str(path), shape=PC)
    at = three_way_split([None] * 30)
    for split, ids in zip(SPLIT_NAMES, at, strict=True):
        expected = tuple(PromptCompletion(f"question {i}?", f" answer {i}") for i in ids)
        assert corpus.splits[split] == expected
        assert corpus.origins is not None
        assert corpus.origins[split] == tuple(Origin("qa.jsonl", 2 + 2 * i) for i in ids)
    assert [len(corpus.splits[s]) for s in SPLIT_NAMES] == [25, 3, 2]
    assert corpus.name == "qa"
    assert "80/10/10" in corpus.description and "train 25, dev 3, test 2" in corpus.description


@pytest.mark.parametrize("suffix", (".csv", ".tsv"))
def test_tables_read_the_named_columns_as_written(work: Path, suffix: str) -> None:
    rows = [[f"q{i}", f" a{i}\nsecond line " if i == 0 else f"a{i}", "x"] for i in range(20)]
    path = write_table(work / f"data{suffix}", ["question", "answer", "other"], rows)
    corpus = load_generative(
        str(path), shape=PC, prompt_column="question", completion_column="answer"
    )
    train = corpus.splits["train"]
    assert train[0] == PromptCompletion("q0", " a0\nsecond line ")
    assert corpus.origins is not None
    assert corpus.origins["train"][:2] == (Origin(path.name, 2), Origin(path.name, 4))


def test_the_alpaca_triple_joins_instruction_and_input_with_a_blank_line(work: Path) -> None:
    records = [
        {"instruction": f"Do {i}.", "input": "" if i % 2 else f"with {i}", "output": f"done {i}"}
        for i in range(19)
    ]
    records.append({"instruction": "No input key.", "output": "fine"})
    corpus = load_generative(str(write_jsonl(work / "alpaca.jsonl", records)), shape=PC)
    everything = [e for split in SPLIT_NAMES for e in corpus.splits[split]]
    assert PromptCompletion("Do 0.\n\nwith 0", "done 0") in everything
    assert PromptCompletion("Do 1.", "done 1") in everything
    assert PromptCompletion("No input key.", "fine") in everything
    header = ["instruction", "input", "output"]
    rows = [[r["instruction"], r.get("input", ""), r["output"]] for r in records]
    table = load_generative(str(write_table(work / "alpaca.csv", header, rows)), shape=PC)
    assert table.splits == corpus.splits


def test_messages_become_conversations(work: Path) -> None:
    corpus = load_generative(
        str(write_jsonl(work / "chats.jsonl", [chat(i) for i in range(20)])), shape="messages"
    )
    first = corpus.splits["train"][0]
    assert first == Conversation(
        (Turn("system", "Be brief."), Turn("user", "hello 0"), Turn("assistant", "hi 0"))
    )
    ending_with_user = chat(0)
    ending_with_user["messages"] = [*ending_with_user["messages"], {"role": "user", "content": "?"}]
    corpus = load_generative(
        str(write_jsonl(work / "more.jsonl", [ending_with_user] * 12)), shape="messages"
    )
    assert corpus.splits["test"][0].turns[-1] == Turn("user", "?")


def test_a_folder_keeps_its_splits_or_carves_dev_from_train(work: Path) -> None:
    folder = work / "splits"
    folder.mkdir()
    write_jsonl(folder / "train.jsonl", pairs(20))
    write_table(folder / "test.csv", ["prompt", "completion"], [["t?", "t"]])
    corpus = load_generative(str(folder), shape=PC)
    train_at, dev_at = carve_dev([None] * 20)
    assert corpus.splits["dev"] == tuple(
        PromptCompletion(f"question {i}?", f" answer {i}") for i in dev_at
    )
    assert len(corpus.splits["train"]) == len(train_at) == 19
    assert corpus.splits["test"] == (PromptCompletion("t?", "t"),)
    assert corpus.origins is not None and corpus.origins["test"] == (Origin("test.csv", 2),)
    write_jsonl(folder / "dev.jsonl", pairs(2))
    given = load_generative(str(folder), shape=PC)
    assert [len(given.splits[s]) for s in SPLIT_NAMES] == [20, 2, 1]
    assert "splits as given" in given.description


def test_sampling_draws_train_and_dev_and_keeps_test(work: Path) -> None:
    corpus = load_generative(str(write_jsonl(work / "qa.jsonl", pairs(100))), shape=PC)
    small = sample_corpus(corpus, 5, seed=3)
    assert [len(small.splits[s]) for s in SPLIT_NAMES] == [5, 5, 9]
    assert set(small.splits["train"]) <= set(corpus.splits["train"])
    assert small.splits["test"] == corpus.splits["test"]
    assert small.origins is not None and corpus.origins is not None
    for split in ("train", "dev"):
        index = {e: o for e, o in zip(corpus.splits[split], corpus.origins[split], strict=True)}
        assert small.origins[split] == tuple(index[e] for e in small.splits[split])
    assert sample_corpus(corpus, 5, seed=3) == small
    assert sample_corpus(corpus, 5, seed=4).splits["train"] != small.splits["train"]
    for size in (0, 82):
        with pytest.raises(DataError, match="pick 1 to 81"):
            sample_corpus(corpus, size, seed=0)


def test_a_builtin_name_is_looked_up_and_must_hold_the_shape(
    work: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    made = GenerativeCorpus(
        "made-up-qa",
        {s: (PromptCompletion("q", "a"),) for s in SPLIT_NAMES},
        "a made-up corpus",
    )
    monkeypatch.setitem(GENERATIVE_BUILTINS, "made-up-qa", lambda tasks: made)
    monkeypatch.setitem(GENERATIVE_SHAPES, "made-up-qa", PC)
    assert load_generative("made-up-qa", shape=PC) == made
    as_chats = load_generative("made-up-qa", shape="messages")  # one-question chats
    asked = Conversation((Turn("user", "q"), Turn("assistant", "a")))
    assert all(as_chats.splits[s] == (asked,) for s in SPLIT_NAMES)
    chats = GenerativeCorpus("made-up-chats", {s: (asked,) for s in SPLIT_NAMES}, "chats")
    monkeypatch.setitem(GENERATIVE_SHAPES, "made-up-chats", "messages")
    monkeypatch.setitem(GENERATIVE_BUILTINS, "made-up-chats", lambda tasks: pytest.fail("loaded"))
    with pytest.raises(ConfigError, match="holds chats \\(messages\\), not prompt-completion"):
        load_generative("made-up-chats", shape=PC)  # refused from its declaration, not loaded
    monkeypatch.setitem(GENERATIVE_BUILTINS, "made-up-chats", lambda tasks: chats)
    assert load_generative("made-up-chats", shape="messages") == chats
    monkeypatch.setitem(GENERATIVE_SHAPES, "made-up-chats", PC)  # declared wrongly
    with pytest.raises(DataError, match="made-up-chats does not hold the prompt-completion"):
        load_generative("made-up-chats", shape=PC)
    with pytest.raises(ConfigError, match="drop prompt_column and completion_column"):
        load_generative("made-up-qa", shape=PC, prompt_column="question")


def bad_row(work: Path, name: str, line: str, shape: str = PC, *needles: str) -> str:
    """Twenty good rows (lines 1-20 of a JSONL file, lines 2-21 of a table) and `line`; the
    error must be one line naming the file, the bad line and `needles`, nothing changed."""
    path = work / name
    if name.endswith(".jsonl"):
        good = [json.dumps(chat(i) if shape == "messages" else pairs(20)[i]) for i in range(20)]
        where = f"{path} line 21"
        path.write_text("\n".join([*good, line]) + "\n")
    else:
        separator = "\t" if name.endswith(".tsv") else ","
        good = [f"question {i}{separator}answer {i}" for i in range(20)]
        where = f"{path} line 22"
        path.write_text("\n".join([f"prompt{separator}completion", *good, line]) + "\n")
    return refused_one_line(work, lambda: load_generative(str(path), shape=shape), where, *needles)


def refused_one_line(work: Path, load: Any, *needles: str) -> str:
    with unchanged(work), pytest.raises(AdaptlabError) as error:
        load()
    message = str(error.value)
    assert "\n" not in message, message
    for needle in needles:
        assert needle in message, (needle, message)
    return message


def messages_line(*turns: Any) -> str:
    return json.dumps({"messages": list(turns)})


USER = {"role": "user", "content": "hello"}
ASSISTANT = {"role": "assistant", "content": "hi"}
SYSTEM = {"role": "system", "content": "be kind"}

BAD_CHATS = {
    "no assistant": (messages_line(SYSTEM, USER), "has no assistant message"),
    "only system": (messages_line(SYSTEM), "has no assistant message"),
    "system later": (
        messages_line(USER, ASSISTANT, SYSTEM),
        "message 3 is a system message; only the first message may be one",
    ),
    "assistant first": (
        messages_line(SYSTEM, ASSISTANT, USER),
        "message 2 is assistant after system",
    ),
    "user twice": (messages_line(USER, USER, ASSISTANT), "message 2 is user after user"),
    "assistant twice": (
        messages_line(USER, ASSISTANT, ASSISTANT),
        "message 3 is assistant after assistant",
    ),
    "unknown role": (
        messages_line(USER, {"role": "tool", "content": "x"}),
        "message 2 has role 'tool'; roles are system, user, assistant",
    ),
    "role not text": (messages_line({"role": 1, "content": "x"}), "message 1 has role 1"),
    "content a list": (
        messages_line(USER, {"role": "assistant", "content": [{"type": "text"}]}),
        "message 2 (assistant) has content [{'type': 'text'}], not a string",
    ),
    "content null": (
        messages_line({"role": "user", "content": None}, ASSISTANT),
        "message 1 (user) has content None, not a string",
    ),
    "content a number": (
        messages_line(USER, {"role": "assistant", "content": 4}),
        "has content 4, not a string",
    ),
    "empty answer": (
        messages_line(USER, {"role": "assistant", "content": "  "}),
        "message 2 (assistant) is empty",
    ),
    "no content": (messages_line(USER, {"role": "assistant"}), "message 2 has no 'content'"),
    "no role": (messages_line({"content": "x"}), "message 1 has no 'role'"),
    "extra key": (
        messages_line(USER, {**ASSISTANT, "weight": 0}),
        "message 2 has 'weight', which is not read",
    ),
    "not an object": (messages_line(USER, "hi"), "message 2 is 'hi', not a {role, content}"),
    "messages empty": (messages_line(), "'messages' must be a non-empty list"),
    "messages a string": (
        json.dumps({"messages": "hello"}),
        "'messages' must be a non-empty list of {role, content} objects, got 'hello'",
    ),
    "no messages": (
        json.dumps({"conversation": []}),
        "column 'messages' not found",
        "(columns found: conversation)",
    ),
    "not json": ('{"messages": [', "is not valid JSON"),
    "not an object line": ("[1, 2]", "is not a JSON object"),
    "lone surrogate": (
        '{"messages": [{"role": "user", "content": "x\\ud800"}, {"role": "assistant", '
        '"content": "y"}]}',
        "message 1 (user) holds an unpaired surrogate (\\ud800)",
    ),
    "nested too deeply": (
        '{"messages": ' + "[" * 100_000 + "]" * 100_000 + "}",
        "nests too deeply",
    ),
    "key twice": (
        '{"messages": [], "messages": [{"role": "user", "content": "x"}]}',
        "names 'messages' more than once",
    ),
}


@pytest.mark.parametrize("case", BAD_CHATS)
def test_a_bad_chat_is_one_line_naming_its_line(work: Path, case: str) -> None:
    line, *needles = BAD_CHATS[case]
    bad_row(work, "chats.jsonl", line, "messages", *needles)


BAD_PAIRS = {
    "empty completion": (
        json.dumps({"prompt": "q", "completion": " \t"}),
        "has an empty completion ('completion')",
    ),
    "completion null": (
        json.dumps({"prompt": "q", "completion": None}),
        "'completion' is None, not a string",
    ),
    "prompt a number": (
        json.dumps({"prompt": 3, "completion": "a"}),
        "'prompt' is 3, not a string",
    ),
    "prompt a chat": (
        json.dumps({"prompt": [USER], "completion": "a"}),
        "'prompt' is [{'role': 'user', 'content': 'hello'}], not a string",
    ),
    "no completion": (
        json.dumps({"prompt": "q", "answer": "a"}),
        "column 'completion' not found",
        "(columns found: prompt, answer); set completion_column to one of them",
    ),
    "lone surrogate": (
        '{"prompt": "q", "completion": "\\udc00"}',
        "'completion' holds an unpaired surrogate (\\udc00); fix that text",
    ),
    "number past the digit limit": (
        '{"prompt": ' + "9" * 5000 + ', "completion": "a"}',
        "holds a number too long to read",
    ),
    "key twice": (
        '{"prompt": "q", "prompt": "r", "completion": "a"}',
        "names 'prompt' more than once",
    ),
}


@pytest.mark.parametrize("case", BAD_PAIRS)
def test_a_bad_pair_is_one_line_naming_its_line(work: Path, case: str) -> None:
    line, *needles = BAD_PAIRS[case]
    bad_row(work, "pairs.jsonl", line, PC, *needles)


@pytest.mark.parametrize("name", ("pairs.csv", "pairs.tsv"))
def test_a_bad_table_row_is_one_line_naming_its_line(work: Path, name: str) -> None:
    separator = "\t" if name.endswith(".tsv") else ","
    bad_row(work, name, f"question{separator}  ", PC, "has an empty completion ('completion')")
    bad_row(work, name, "question only", PC, "has 1 field, the header has 2")


def test_an_empty_alpaca_output_is_one_line_naming_its_line(work: Path) -> None:
    path = work / "alpaca.jsonl"
    good = [json.dumps({"instruction": f"i{i}", "input": "", "output": "o"}) for i in range(20)]
    bad = json.dumps({"instruction": "i", "input": "", "output": ""})
    path.write_text("\n".join([*good, bad]))
    refused_one_line(
        work,
        lambda: load_generative(str(path), shape=PC),
        f"{path} line 21",
        "empty completion ('output')",
    )
    path.write_text(
        "\n".join([*good, json.dumps({"instruction": "i", "input": None, "output": "o"})])
    )
    refused_one_line(
        work, lambda: load_generative(str(path), shape=PC), f"{path} line 21", "'input' is None"
    )
    path.write_text("\n".join([*good, json.dumps({"instruction": "i"})]))
    refused_one_line(
        work,
        lambda: load_generative(str(path), shape=PC),
        f"{path} line 21",
        "column 'output' not found",
        "instruction and an output",
    )


def test_missing_columns_name_the_column_and_the_columns_there_are(work: Path) -> None:
    table = write_table(work / "qa.csv", ["question", "answer"], [["q", "a"]] * 20)
    refused_one_line(
        work,
        lambda: load_generative(str(table), shape=PC),
        f"column 'prompt' not found in {table} (columns found: question, answer)",
        "set prompt_column and completion_column, or give the columns instruction, input, output",
    )
    refused_one_line(
        work,
        lambda: load_generative(str(table), shape=PC, prompt_column="question"),
        "column 'completion' not found",
        "set completion_column to one of them",
    )
    refused_one_line(
        work,
        lambda: load_generative(
            str(table), shape=PC, prompt_column="q", completion_column="answer"
        ),
        "column 'q' not found in",
        "(columns found: question, answer); set prompt_column to one of them",
    )
    twice = write_table(
        work / "twice.csv", ["prompt", "completion", "prompt"], [["q", "a", "r"]] * 20
    )
    refused_one_line(
        work, lambda: load_generative(str(twice), shape=PC), "names column 'prompt' more than once"
    )


def test_sources_that_cannot_be_read_as_asked_are_one_line(work: Path) -> None:
    table = write_table(work / "chats.csv", ["messages"], [["x"]] * 20)
    refused_one_line(
        work,
        lambda: load_generative(str(table), shape="messages"),
        "chats are read from JSONL files",
    )
    text = work / "notes.txt"
    text.write_text("prompt\n")
    refused_one_line(
        work, lambda: load_generative(str(text), shape=PC), "unknown data file extension '.txt'"
    )
    few = write_jsonl(work / "few.jsonl", pairs(10))
    refused_one_line(
        work,
        lambda: load_generative(str(few), shape=PC),
        "the test split of few has no examples",
        "at least 11",
    )
    empty = work / "empty.jsonl"
    empty.write_text("\n\n")
    refused_one_line(work, lambda: load_generative(str(empty), shape=PC), "has no data rows")
    refused_one_line(
        work,
        lambda: load_generative(str(work / "missing.jsonl"), shape=PC),
        "unknown generative data source",
        "no such file or folder",
    )
    refused_one_line(
        work,
        lambda: load_generative(str(few), shape="chat"),
        "unknown generative data shape 'chat'",
    )
    refused_one_line(
        work,
        lambda: load_generative(str(few), shape=PC, prompt_column="completion"),
        "are both 'completion'",
    )
    latin = work / "latin.jsonl"
    latin.write_bytes(
        json.dumps(pairs(1)[0]).encode()
        + b"\n"
        + '{"prompt": "caf\xe9", "completion": "x"}'.encode("latin-1")
    )
    refused_one_line(
        work, lambda: load_generative(str(latin), shape=PC), f"{latin} line 2 is not UTF-8"
    )


def test_folders_without_usable_splits_are_one_line(work: Path) -> None:
    folder = work / "splits"
    folder.mkdir()
    refused_one_line(
        work,
        lambda: load_generative(str(folder), shape=PC),
        "has no training file; add one of train.jsonl",
    )
    write_jsonl(folder / "train.jsonl", pairs(20))
    write_jsonl(folder / "dev.jsonl", pairs(2))
    refused_one_line(
        work, lambda: load_generative(str(folder), shape=PC), "has a dev split but no test split"
    )
    write_table(folder / "train.csv", ["prompt", "completion"], [["q", "a"]])
    refused_one_line(
        work,
        lambda: load_generative(str(folder), shape=PC),
        "several train files (train.jsonl, train.csv)",
    )


def test_reading_generative_data_loads_no_torch() -> None:
    """Records and reports import the data types; loading files needs no model either."""
    code = (
        "import sys, adaptlab.data.generative, adaptlab.data.generative_loading; "
        "print(sorted({'torch', 'transformers'} & set(sys.modules)))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_every_builtin_declares_what_it_holds() -> None:
    assert set(GENERATIVE_SHAPES) == set(GENERATIVE_BUILTINS)
    assert set(GENERATIVE_SHAPES.values()) <= {PC, "messages"}
