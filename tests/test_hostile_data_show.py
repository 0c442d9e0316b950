"""`adaptlab data list` and `data show` for what a new user reaches for: the built-in generative
corpora are listed with the tasks that read them and shown as those tasks read them; a
generative data file is shown with `--task sft`, a labelled data option refused for it; an
empty data source (`data show ""`, `--data ""`, which read the current folder as a data set)
is one `error:` line. Each refusal exits 1, every input unchanged byte for byte."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_cases import refused, run_cli, unchanged, write_reviews

from adaptlab.data import generative_builtins
from adaptlab.data.generative import GenerativeCorpus, PromptCompletion
from adaptlab.data.generative_builtins import generative_builtin_datasets
from adaptlab.data.types import SPLIT_NAMES


def row(out: str, first: str) -> list[str]:
    """The cells of the table row of `out` whose first cell is `first`."""
    for line in out.splitlines():
        cells = [cell.strip() for cell in line.split("│")[1:-1]]
        if cells and cells[0] == first:
            return cells[1:]
    raise AssertionError(f"no row {first!r} in {out}")


def test_data_list_names_every_generative_corpus_with_the_tasks_that_read_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = run_cli(["data", "list"], capsys)
    assert code == 0, err
    for name in generative_builtin_datasets():
        assert row(out, name)
    assert row(out, "countries-qa")[0] == "sft, chat, seq2seq"
    assert row(out, "friends-chat")[0] == "chat"
    assert row(out, "rotten-tomatoes")[0] == "single_label"


def pairs(count: int) -> tuple[PromptCompletion, ...]:
    return tuple(PromptCompletion(f"capital of land {i}?", f" city {i}") for i in range(count))


def test_a_builtin_generative_corpus_is_shown_as_its_first_task_reads_it(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    splits = dict(zip(SPLIT_NAMES, (pairs(8), pairs(2), pairs(3)), strict=True))
    corpus = GenerativeCorpus("countries-qa", splits, "questions on countries")
    monkeypatch.setitem(
        generative_builtins.GENERATIVE_BUILTINS, "countries-qa", lambda tasks: corpus
    )
    code, out, err = run_cli(["data", "show", "countries-qa"], capsys)
    assert code == 0, err
    assert out.splitlines()[0] == "countries-qa (sft): questions on countries"
    assert row(out, "examples") == ["8", "2", "3"]
    assert "{'prompt': 'capital of land 0?', 'completion': ' city 0'}" in out


def test_a_generative_file_is_shown_for_its_task_and_a_label_option_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "pairs.jsonl"
    rows = [{"prompt": f"what is {i} plus 1?", "completion": str(i + 1)} for i in range(30)]
    data.write_text("".join(json.dumps(row) + "\n" for row in rows))
    with unchanged(tmp_path):
        code, out, err = run_cli(["data", "show", str(data), "--task", "sft"], capsys)
        assert code == 0, err
        assert out.startswith("pairs (sft): ") and row(out, "examples") == ["25", "3", "2"]
        assert "{'prompt': 'what is 2 plus 1?', 'completion': '3'}" in out
        refused(
            ["data", "show", str(data), "--task", "sft", "--label-column", "answer"], capsys,
            f"--label-column reads labelled data; {data} is read as prompt-completion data",
        )  # fmt: skip


@pytest.mark.parametrize("blank", ["", "  "])
def test_an_empty_data_source_is_one_line(
    blank: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    write_reviews(tmp_path / "train.csv")  # what the current folder would be read as
    monkeypatch.chdir(tmp_path)
    hint = "give a built-in name (adaptlab data list), a data file or folder, or hf:NAME"
    with unchanged(tmp_path):
        refused(["data", "show", blank], capsys, "SOURCE is empty", hint)
        refused(["analyze", "rsa", "--adapter", "run", "--data", blank], capsys, "--data is empty")
        refused(["rank", "--models", "m", "--data", blank], capsys, "--data is empty", hint)
