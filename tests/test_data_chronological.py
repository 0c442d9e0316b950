"""Chronological splits: the earliest rows train, later periods are dev and test, never the
other way round; one-line errors for a missing or bad time column."""

from __future__ import annotations

import csv
import json
import random
import re
from datetime import date, timedelta
from pathlib import Path

import pytest

from adaptlab.cli.app import main
from adaptlab.data import load_dataset
from adaptlab.errors import ConfigError, DataError
from adaptlab.study.planner import plan_study
from adaptlab.study.spec import load_spec
from adaptlab.tasks.registry import LABELLED


def write_dated(path: Path, rows: int = 100, ties: bool = False) -> Path:
    """A CSV in shuffled order whose text carries its own date, so a test can read it back."""
    start = date(2015, 1, 1)
    days = [i // 5 if ties else i * 3 for i in range(rows)]
    random.Random(0).shuffle(days)
    with path.open("w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(["text", "label", "date"])
        for n, day in enumerate(days):
            when = (start + timedelta(days=day)).isoformat()
            writer.writerow([f"{when} comment {n}", "pos" if n % 2 else "neg", when])
    return path


def dates(examples: tuple) -> list[str]:  # type: ignore[type-arg]
    return [example.text.split()[0] for example in examples]


@pytest.mark.parametrize("ties", [False, True])
def test_no_later_example_in_training(tmp_path: Path, ties: bool) -> None:
    path = write_dated(tmp_path / "comments.csv", ties=ties)
    data = load_dataset(str(path), LABELLED, split="chronological", time_column="date")
    train, dev, test = (dates(data.splits[s]) for s in ("train", "dev", "test"))
    assert (len(train), len(dev), len(test)) == (80, 10, 10)
    assert max(train) <= min(dev) and max(dev) <= min(test)
    assert f"train {min(train)} .. {max(train)}" in data.description
    assert f"test {min(test)} .. {max(test)}" in data.description


def test_random_split_of_the_same_file_mixes_periods(tmp_path: Path) -> None:
    path = write_dated(tmp_path / "comments.csv")
    data = load_dataset(str(path), LABELLED)
    assert max(dates(data.splits["train"])) > min(dates(data.splits["test"]))


def test_years_and_jsonl_times(tmp_path: Path) -> None:
    path = tmp_path / "posts.jsonl"
    years = list(range(1990, 2010)) * 2
    random.Random(1).shuffle(years)
    lines = [json.dumps({"text": f"{y} post", "label": y % 2, "year": y}) for y in years]
    path.write_text("\n".join(lines) + "\n")
    data = load_dataset(str(path), LABELLED, split="chronological", time_column="year")
    train, test = dates(data.splits["train"]), dates(data.splits["test"])
    assert max(train) <= min(test) and min(test) == "2008"


def test_bad_time_names_the_row(tmp_path: Path) -> None:
    path = write_dated(tmp_path / "comments.csv", rows=20)
    text = path.read_bytes().replace(b",2015-01-01\r\n", b",last tuesday\r\n")
    path.write_bytes(text)
    with pytest.raises(DataError, match=r"time 'last tuesday' \(.*comments.csv line \d+\)"):
        load_dataset(str(path), LABELLED, split="chronological", time_column="date")


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        ({"split": "chronological"}, ConfigError, "needs the column that dates each row"),
        ({"time_column": "date"}, ConfigError, "is for --split chronological"),
        ({"split": "by-date"}, ConfigError, "unknown split 'by-date'"),
        ({"split": "chronological", "time_column": "when"}, DataError, "column 'when' not found"),
    ],
)
def test_split_options_are_checked(
    tmp_path: Path, options: dict[str, str], error: type[Exception], message: str
) -> None:
    path = write_dated(tmp_path / "comments.csv", rows=20)
    with pytest.raises(error, match=message):
        load_dataset(str(path), LABELLED, **options)


def test_given_splits_are_not_cut_by_time(tmp_path: Path) -> None:
    write_dated(tmp_path / "train.csv", rows=20)
    write_dated(tmp_path / "test.csv", rows=20)
    with pytest.raises(DataError, match="comes with its own dev/test split"):
        load_dataset(str(tmp_path), LABELLED, split="chronological", time_column="date")


def test_builtins_without_dates_say_which_have_them() -> None:
    with pytest.raises(ConfigError, match="dated built-ins: slovenian-opinions"):
        load_dataset("rotten-tomatoes", LABELLED, split="chronological")


@pytest.mark.real
def test_slovenian_chronological_builtin_cuts_by_date() -> None:
    data = load_dataset("slovenian-opinions-chronological", LABELLED)
    moment = r"(\S+ \S+)"
    found = re.search(
        rf"train {moment} \.\. {moment}; dev {moment} \.\. {moment}; test {moment} \.\. {moment}:",
        data.description,
    )
    assert found is not None, data.description
    train_to, dev_from, dev_to, test_from = found.group(2, 3, 4, 5)
    assert train_to <= dev_from and dev_to <= test_from
    assert load_dataset("slovenian-opinions", LABELLED, split="chronological").splits == data.splits


def test_cli_shows_the_cut_dates(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_dated(tmp_path / "comments.csv")
    with pytest.raises(SystemExit) as done:
        main(["data", "show", str(path), "--split", "chronological", "--time-column", "date"])
        raise SystemExit(0)
    out = capsys.readouterr().out
    assert done.value.code in (0, None)
    assert "chronological by date" in out and "train 2015-01-01" in out


def test_study_data_entries_take_the_split(tmp_path: Path) -> None:
    write_dated(tmp_path / "comments.csv")
    spec = tmp_path / "s.yaml"
    spec.write_text(
        "name: s\nmodels: [minilm-l6]\nmethods: [houlsby]\n"
        "data: [{comments.csv: {split: chronological, time_column: date}}]\n"
    )
    (run,) = plan_study(load_spec(spec), spec.parent)
    assert run.spec.data_options == {"split": "chronological", "time_column": "date"}
    assert load_dataset(run.spec.data, LABELLED, **run.spec.data_options).description.count(
        "chronological"
    )
