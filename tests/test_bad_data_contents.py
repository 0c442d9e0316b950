"""Data whose contents say one thing and would train another: numbers read as classes, rows
whose fields shift into the wrong columns, a column used twice, an empty record. Each is one
`error:` line naming the thing and what to do, through the command line, and no input file
changes."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from cli_cases import refused, run_cli, unchanged, write_reviews

import adaptlab.data.builtin as builtin


@pytest.fixture
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


def write_labels(path: Path, labels: list[str]) -> Path:
    """A CSV with one plain text per label."""
    path.write_text("text,label\n" + "".join(f"text {i},{x}\n" for i, x in enumerate(labels)))
    return path


def reviews_with(work: Path, name: str, line: str) -> Path:
    """Forty good review rows (lines 2-41) and then `line` (line 42)."""
    rows = [f"review {i},{'pos' if i % 2 else 'neg'}" for i in range(40)]
    path = work / name
    separator = "\t" if name.endswith(".tsv") else ","
    text = "\n".join(row.replace(",", separator) for row in ["text,label", *rows, line])
    path.write_text(text + "\n")
    return path


def test_floats_with_nan_are_not_classes(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    labels = [f"{i / 100 + 0.005:.3f}" for i in range(500)]
    random.Random(0).shuffle(labels)
    labels[5] = "nan"  # line 7
    write_labels(work / "scores.csv", labels)
    with unchanged(work):
        refused(
            ["data", "show", "scores.csv"],
            capsys,
            "label column 'label' has 499 distinct numeric values in 500 rows",
            "'nan' (scores.csv line 7) is not a number",
            "--task regression",
        )


def test_many_distinct_integers_are_not_classes(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_labels(work / "ids.csv", [str(1000 + i) for i in range(300)])
    with unchanged(work):
        refused(
            ["data", "show", "ids.csv"],
            capsys,
            "label column 'label' has 300 distinct numeric values in 300 rows",
            "use --task regression",
        )


def test_integer_classes_stay_classes(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_labels(work / "opinions.csv", [str((-1, 0, 1)[i % 3]) for i in range(60)])
    code, out, err = run_cli(["data", "show", "opinions.csv"], capsys)
    assert code == 0, err
    assert "opinions (single_label)" in out and "'label': '-1'" in out


def test_nan_among_integer_classes_names_its_line(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    labels = [str((-1, 0, 1)[i % 3]) for i in range(60)]
    labels[20] = "NaN"  # line 22
    write_labels(work / "opinions.csv", labels)
    with unchanged(work):
        refused(
            ["data", "show", "opinions.csv"],
            capsys,
            "opinions.csv line 22 has label 'NaN', a missing value rather than a class",
        )


@pytest.mark.parametrize(
    ("name", "line", "needles"),
    [
        (
            "commas.csv",
            "good, really good,pos",
            (
                "commas.csv line 42 has 3 fields, the header has 2",
                "quote text that contains commas",
            ),
        ),
        (
            "tabs.tsv",
            "good\treally good\tpos",
            ("tabs.tsv line 42 has 3 fields, the header has 2", "quote text that contains tabs"),
        ),
        (
            "short.csv",
            "a text cut by a line break\nthe rest of it,pos",
            ("short.csv line 42 has 1 field, the header has 2", "fill in the missing fields"),
        ),
    ],
)
def test_a_row_that_does_not_match_the_header_names_its_line(
    name: str,
    line: str,
    needles: tuple[str, ...],
    work: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    reviews_with(work, name, line)
    with unchanged(work):
        refused(["data", "show", name], capsys, *needles)


def test_a_word_with_a_space_in_a_bio_file_names_its_line(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sentences = [f"Alice B-per\nvisited O\nParis{i} B-loc\n" for i in range(20)]
    sentences[3] = "New York B-loc\nsleeps O\n"  # lines 13-14
    (work / "ner.txt").write_text("\n".join(sentences))
    with unchanged(work):
        refused(
            ["data", "show", "ner.txt"],
            capsys,
            "ner.txt line 13 has 3 columns, line 1 has 2",
            "a word cannot contain spaces",
        )


def test_an_orange_table_row_that_does_not_match_the_header_names_its_line(
    work: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    package = work / "package"
    table = package / "text" / "datasets" / "slo-opinion-corpus.tab"
    table.parent.mkdir(parents=True)
    header = "CreatedDateTimeUtc\tScore text\tContent\ntime\tcontinuous\tstring\n\t\tmeta\n"
    rows = [f"2015-01-{1 + i % 28:02d}\t{(-1, 0, 1)[i % 3]}.0\tcomment {i}" for i in range(40)]
    rows[10] = "2015-02-01\t1.0\ta comment\twith a tab"  # line 14
    table.write_text(header + "\n".join(rows) + "\n\n")  # a blank last line is dropped

    class Spec:
        submodule_search_locations = [str(package)]

    monkeypatch.setattr(builtin, "find_spec", lambda name: Spec())
    with unchanged(work):
        refused(
            ["data", "show", "slovenian-opinions"],
            capsys,
            "slo-opinion-corpus.tab line 14 has 4 fields, the header has 3",
            "quote text that contains tabs",
        )


def test_a_record_without_text_or_label_names_its_line(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    reviews_with(work, "gap.csv", ",")
    records: list[dict[str, str | None]] = [
        {"text": f"review {i}", "label": "pos" if i % 2 else "neg"} for i in range(40)
    ]
    records[8] = {"text": " ", "label": None}  # line 9
    (work / "gap.jsonl").write_text("\n".join(json.dumps(r) for r in records) + "\n")
    with unchanged(work):
        refused(
            ["data", "show", "gap.csv"],
            capsys,
            "gap.csv line 42 has an empty text and an empty label",
            "fill them in or delete that record",
        )
        refused(["data", "show", "gap.jsonl"], capsys, "gap.jsonl line 9 has an empty text")


@pytest.mark.parametrize(
    ("options", "needles"),
    [
        (
            ["--text-column", "label", "--label-column", "label"],
            ("text column and the label column are both 'label'", "read the answer"),
        ),
        (
            ["--text-pair-column", "text"],
            ("text pair column and the text column are both 'text'", "--text-pair-column"),
        ),
        (
            ["--text-pair-column", "label"],
            ("text pair column and the label column are both 'label'", "read the answer"),
        ),
    ],
)
@pytest.mark.parametrize("command", ["data", "train", "eval"])
def test_one_column_in_two_roles_is_refused(
    command: str,
    options: list[str],
    needles: tuple[str, ...],
    work: Path,
    trained: Path,
    tiny_model_dir: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    write_reviews(work / "reviews.csv")
    args = {
        "data": ["data", "show", "reviews.csv"],
        "train": ["train", "--model", tiny_model_dir, "--data", "reviews.csv", "--out", "run"],
        "eval": [
            *("eval", "--adapter", str(trained), "--model", tiny_model_dir),
            *("--data", "reviews.csv"),
        ],
    }[command]
    with unchanged(work), unchanged(trained):
        refused([*args, *options], capsys, *needles)
    assert not (work / "run").exists()
