"""Data files that are wrong in a way a reader could guess around: a used column named twice
(the last one used to win silently), and errors that named the wrong line (a quote left open on
line 23 reported as an empty label on line 120; a huge field on line 2 reported on line 1)."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_cases import refused, run_cli, unchanged

from adaptlab.data import load_dataset
from adaptlab.errors import DataError
from adaptlab.tasks.registry import LABELLED


@pytest.fixture
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


def rows(count: int = 40, separator: str = ",") -> list[str]:
    return [f"row {i} text{separator}{'pos' if i % 2 else 'neg'}" for i in range(count)]


@pytest.mark.parametrize(
    "name, text, message",
    [
        ("dup.csv", "text,label,label\n", "dup.csv names column 'label' more than once"),
        ("dup-text.csv", "text,text,label\n", "names column 'text' more than once"),
        ("dup.tsv", "text\tlabel\tlabel\n", "dup.tsv names column 'label' more than once"),
    ],
)
def test_a_used_column_named_twice_is_refused(
    name: str, text: str, message: str, work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    separator = "\t" if name.endswith(".tsv") else ","
    body = [
        f"{line}{separator}{'neg' if i % 2 else 'pos'}"
        for i, line in enumerate(rows(40, separator))
    ]
    (work / name).write_text(text + "\n".join(body) + "\n")
    with unchanged(work):
        refused(["data", "show", name], capsys, message)


def test_an_unused_column_named_twice_is_fine(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = ["note,text,label,note"] + [f"a,{row},b" for row in rows()]
    (work / "notes.csv").write_text("\n".join(lines) + "\n")
    code, out, err = run_cli(["data", "show", "notes.csv"], capsys)
    assert code == 0 and "examples" in out, err


def test_a_jsonl_record_with_a_repeated_key_is_refused(work: Path) -> None:
    records = [f'{{"text": "t{i}", "label": "a", "meta": {{"k": 1, "k": 2}}}}' for i in range(30)]
    records[7] = '{"text": "t7", "label": "a", "label": "b"}'
    (work / "d.jsonl").write_text("\n".join(records) + "\n")
    with pytest.raises(DataError, match=r"d.jsonl line 8 names column 'label' more than once"):
        load_dataset(str(work / "d.jsonl"), LABELLED)


def test_an_unclosed_quote_is_reported_on_its_own_line(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = ["text,label", *rows(120)]
    lines[22] = '"row 22 never closed,pos'  # line 23 of the file
    (work / "quote.csv").write_text("\n".join(lines) + "\n")
    refused(["data", "show", "quote.csv"], capsys, "quote.csv line 23", "never closed")


@pytest.mark.parametrize("line", [2, 3])
def test_a_field_over_the_size_limit_is_reported_on_its_own_line(
    line: int, work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = ["text,label", *rows(10)]
    lines[line - 1] = "x" * 1_000_000 + ",pos"
    (work / "big.csv").write_text("\n".join(lines) + "\n")
    refused(["data", "show", "big.csv"], capsys, f"big.csv line {line} ", "longer than 131,072")


def test_a_record_over_several_lines_is_named_by_its_first_and_last_line(work: Path) -> None:
    lines = ["text,label", "", *rows(10)]  # a blank line 2 counts as a line
    lines[5] = '"a text over\nthree\nlines",'  # starts on line 6, ends on line 8, no label
    (work / "multi.csv").write_text("\n".join(lines) + "\n")
    with pytest.raises(DataError, match=r"multi.csv lines 6-8 has an empty label"):
        load_dataset(str(work / "multi.csv"), LABELLED)


def test_predict_names_the_line_that_is_not_utf8(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (work / "texts.txt").write_bytes(b"fine\nalso fine\n\xff\xfe broken\n")
    refused(
        ["predict", "--adapter", "nowhere", "--input", "texts.txt"],
        capsys,
        "texts.txt line 3 is not UTF-8 text",
    )
