"""Each run folder keeps its split record (`splits.json`): which source rows went to train, dev
and test. Read back against the data, it shows a chronological low-resource run training on the
earliest period, picking its epoch on the next and testing on the latest."""

from __future__ import annotations

import csv
import hashlib
import json
import random
from datetime import date, timedelta
from pathlib import Path

import pytest
from cli_cases import RUN_FILES, run_cli, train_run, write_reviews

from adaptlab.data.types import SPLIT_NAMES
from adaptlab.errors import ConfigError
from adaptlab.records.config import TrainConfig
from adaptlab.records.split_record import SplitRecord, read_split_record
from adaptlab.runs.run import RunSpec, execute

ROWS = 100


def write_dated(path: Path) -> Path:
    """A labelled CSV in shuffled order, one distinct date a row (every third day of 2015)."""
    days = [3 * i for i in range(ROWS)]
    random.Random(0).shuffle(days)
    with path.open("w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(["text", "label", "date"])
        for n, day in enumerate(days):
            label = "fresh" if n % 2 else "rotten"
            when = (date(2015, 1, 1) + timedelta(days=day)).isoformat()
            writer.writerow([f"a {('great', 'dull')[n % 2]} film {n}", label, when])
    return path


def dates_by_line(path: Path) -> dict[int, str]:
    """The date of each data line of a CSV without quoted line breaks (line 1: the header)."""
    lines = path.read_text().splitlines()
    return {number: line.rsplit(",", 1)[1] for number, line in enumerate(lines, 1) if number > 1}


def test_a_chronological_low_resource_run_keeps_train_dev_test_in_time_order(
    tiny_model_dir: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = write_dated(tmp_path / "dated.csv")
    args = ["train", "--model", tiny_model_dir, "--data", str(data), "--method", "bitfit"]
    args += ["--split", "chronological", "--time-column", "date", "--train-size", "20"]
    code, _, err = run_cli([*args, "--epochs", "1", "--out", str(tmp_path / "run")], capsys)
    assert code == 0, err
    record = read_split_record(tmp_path / "run")
    assert record.data == str(data)
    assert record.digest == hashlib.sha256(data.read_bytes()).hexdigest()
    when = dates_by_line(data)
    periods = {
        split: sorted(when[row] for row in record.splits[split]["dated.csv"])
        for split in SPLIT_NAMES
    }
    # 20 of the 80 earliest rows; the whole dev period (10 rows, fewer than 20); the test period
    assert [len(periods[split]) for split in SPLIT_NAMES] == [20, 10, 10]
    assert periods["train"][-1] < periods["dev"][0] and periods["dev"][-1] < periods["test"][0]
    ordered = sorted(when.values())
    assert periods["dev"] == ordered[80:90] and periods["test"] == ordered[90:]
    stored = json.loads((tmp_path / "run" / "metrics.json").read_text())["data"]["time_split"]
    assert stored["periods"] == [
        {"split": split, "first": periods[split][0], "last": periods[split][-1]}
        for split in SPLIT_NAMES
    ]


def test_a_random_split_record_covers_every_row_once(tiny_model_dir: str, tmp_path: Path) -> None:
    data = write_reviews(tmp_path / "reviews.csv", rows=60)
    run = train_run(tiny_model_dir, data, tmp_path / "run")
    record = read_split_record(run / "splits.json")
    rows = [row for split in SPLIT_NAMES for row in record.splits[split]["reviews.csv"]]
    assert sorted(rows) == list(range(2, 62))
    sizes = json.loads((run / "metrics.json").read_text())["data"]["sizes"]
    assert {split: len(record.splits[split]["reviews.csv"]) for split in SPLIT_NAMES} == sizes


def test_a_low_resource_record_names_the_sampled_rows(tiny_model_dir: str, tmp_path: Path) -> None:
    data = write_reviews(tmp_path / "reviews.csv", rows=60)
    train = TrainConfig(epochs=1, batch_size=16, learning_rate=1e-3, seed=0)
    spec = RunSpec.build(tiny_model_dir, str(data), "bitfit", train=train, train_size=10)
    result = execute(spec, tmp_path / "run", progress=False)
    record = read_split_record(tmp_path / "run")
    picked = {split: record.splits[split]["reviews.csv"] for split in SPLIT_NAMES}
    assert (
        (len(picked["train"]), len(picked["dev"]))
        == (10, 10)
        == (result.data.sizes["train"], result.data.sizes["dev"])
    )
    assert not set(picked["train"]) & set(picked["dev"])
    texts = dict(enumerate(data.read_text().splitlines(), 1))
    assert all(texts[row].startswith("a ") for row in picked["train"])


def test_a_masked_lm_run_records_its_documents_lines(tiny_model_dir: str, tmp_path: Path) -> None:
    lines = [f"the cat sat on mat {i}" if i % 7 else "" for i in range(70)]
    (tmp_path / "corpus.txt").write_text("\n".join(lines) + "\n")
    train = TrainConfig(epochs=1, batch_size=16, learning_rate=1e-2, seed=0)
    options = {"task": "mlm"}
    spec = RunSpec.build(
        tiny_model_dir, str(tmp_path / "corpus.txt"), "pfeiffer", train=train, data_options=options
    )
    result = execute(spec, tmp_path / "run", progress=False)
    record = read_split_record(tmp_path / "run")
    rows = {split: record.splits[split]["corpus.txt"] for split in SPLIT_NAMES}
    assert sorted(r for found in rows.values() for r in found) == [
        i + 1 for i in range(70) if i % 7
    ]
    assert {split: len(found) for split, found in rows.items()} == result.data.sizes


def test_overwrite_replaces_a_run_folder_that_keeps_a_split_record(
    tiny_model_dir: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = write_reviews(tmp_path / "reviews.csv", rows=40)
    run = train_run(tiny_model_dir, data, tmp_path / "run")
    assert (run / "splits.json").is_file()
    args = ["train", "--model", tiny_model_dir, "--data", str(data), "--method", "bitfit"]
    code, _, err = run_cli([*args, "--epochs", "1", "--out", str(run), "--overwrite"], capsys)
    assert code == 0, err
    assert sorted(p.name for p in run.iterdir()) == RUN_FILES


def test_a_bad_split_record_is_one_line_naming_the_field(tmp_path: Path) -> None:
    record = SplitRecord("d.csv", None, {"train": {"d.csv": (2, 3)}, "dev": {}, "test": {}})
    assert SplitRecord.from_dict(record.to_dict()) == record
    bad = record.to_dict()
    bad["splits"]["train"]["d.csv"] = [2, "3"]
    (tmp_path / "splits.json").write_text(json.dumps(bad))
    with pytest.raises(ConfigError, match=r"splits.train.d.csv: expected a list of row numbers"):
        read_split_record(tmp_path)
