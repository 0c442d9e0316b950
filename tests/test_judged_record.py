"""A run's record says which metric judges it: `metric` is the one that picked the best epoch,
`judged_by` the one `adaptlab train` prints as "judged by", and why. Records written before
`judged_by` existed still load."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from cli_cases import run_cli

from adaptlab.records.result import RunResult, read_result

FIXTURES = Path(__file__).parent / "fixtures"


def write_skewed(path: Path) -> Path:
    """Five reviews of one class for each of the other: macro-F1 judges such data."""
    with path.open("w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(["text", "label"])
        for i in range(72):
            label = "rotten" if i % 6 == 0 else "fresh"
            writer.writerow([f"a {'dull' if label == 'rotten' else 'great'} film {i}", label])
    return path


def test_a_run_judged_by_macro_f1_records_it(
    tiny_model_dir: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = write_skewed(tmp_path / "skewed.csv")
    args = ["train", "--model", tiny_model_dir, "--data", str(data), "--method", "bitfit"]
    code, out, err = run_cli([*args, "--epochs", "1", "--out", str(tmp_path / "run")], capsys)
    assert code == 0, err
    assert "judged by macro_f1" in out
    saved = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert saved["metric"] == "accuracy"  # the metric that picked the best epoch
    assert saved["judged_by"]["metric"] == "macro_f1"
    assert "(fresh, 49 examples) is 5.4x its smallest (rotten, 9)" in saved["judged_by"]["reason"]
    result = read_result(tmp_path / "run" / "metrics.json")
    assert result.judged_by is not None and result.judged_by.metric == "macro_f1"
    assert RunResult.from_dict(result.to_dict()) == result


def test_records_written_before_judged_by_still_load() -> None:
    old = read_result(FIXTURES / "record-0.1.0.json")
    assert old.judged_by is None and old.metric == "accuracy"
    assert "judged_by" not in old.to_dict()
    stored = json.loads((FIXTURES / "reuters-imbalance.json").read_text(encoding="utf-8"))
    results = [RunResult.from_dict(row["record"]) for row in stored]
    assert results and all(result.judged_by is None for result in results)
