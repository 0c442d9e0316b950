"""The report's temporal-drift section: runs paired across a random and a chronological split of
the same data (and only those), their numbers, the stored cut dates, and its absence."""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import pytest
from study_helpers import fake_result, one_thread, write_spec
from test_data_chronological import write_dated
from test_report_html import IMG, section
from test_report_records import make_row, make_study, stored
from tiny_models import save_tiny_bert

from adaptlab.errors import ConfigError
from adaptlab.records.result import RunResult
from adaptlab.report import render_report
from adaptlab.report.records import read_runs
from adaptlab.report.temporal import comparisons
from adaptlab.study.executors import LocalExecutor
from adaptlab.study.planner import plan_study
from adaptlab.study.runner import run_study
from adaptlab.study.spec import load_spec
from adaptlab.study.store import StoredRun, load_records

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "temporal-drift.yaml"
CUTS = {
    "column": "CreatedDateTimeUtc",
    "periods": [
        {"split": "train", "first": "2007-08-21 08:43:00", "last": "2015-09-08 18:24:00"},
        {"split": "dev", "first": "2015-09-08 18:24:00", "last": "2015-10-18 11:38:00"},
        {"split": "test", "first": "2015-10-18 11:43:00", "last": "2015-12-22 08:18:41"},
    ],
}
RANDOM = {"full": (0.70, 0.72, 0.74), "lora(r=8)": (0.80, 0.81, 0.79)}
LATER = {"full": (0.60, 0.66, 0.66), "lora(r=8)": (0.78, 0.80, 0.78)}


def chronological_row(**fields: Any) -> dict[str, Any]:
    """A run on the chronological built-in, with the cut dates its data stored."""
    row = make_row(data="slovenian-opinions-chronological", **fields)
    row["data"]["time_split"] = CUTS
    return row


def drift_store(**changes: Any) -> list[StoredRun]:
    """Two methods x three seeds on both splits of the Slovenian comments; `changes` alter
    every chronological run (to show what stops the pairing)."""
    records = []
    for method in RANDOM:
        for seed in range(3):
            common = {"method": method, "seed": seed, "learning_rate": 1e-4}
            records.append(
                stored(make_row(data="slovenian-opinions", test=RANDOM[method][seed], **common))
            )
            row = chronological_row(test=LATER[method][seed], **{**common, **changes})
            records.append(stored(row))
    return records


def cells(part: str) -> list[list[str]]:
    """The text of each body row of the tables in `part`."""
    body = "".join(re.findall(r"<tbody>(.*?)</tbody>", part, re.S))
    return [
        re.findall(r"<td>(.*?)</td>", row, re.S)
        for row in re.findall(r"<tr>(.*?)</tr>", body, re.S)
    ]


def test_runs_pair_across_the_two_builtins_seed_by_seed() -> None:
    found = comparisons(read_runs(drift_store()))
    assert [(c.method, c.random.data, c.chronological.data) for c in found] == [
        ("full", "slovenian-opinions", "slovenian-opinions-chronological"),
        ("lora(r=8)", "slovenian-opinions", "slovenian-opinions-chronological"),
    ]
    assert [(r.seed, c.seed, r.split, c.split) for r, c in found[0].pairs] == [
        (seed, seed, "random", "chronological") for seed in range(3)
    ]
    random, later, drift = found[0].scores("accuracy")
    assert (random, later) == (list(RANDOM["full"]), list(LATER["full"]))
    assert drift == pytest.approx([0.10, 0.06, 0.08])


def test_the_section_shows_both_splits_the_drift_and_the_cut_dates() -> None:
    page = render_report(drift_store(), title="drift")
    part = section(page, "temporal")
    assert "<h3>slovenian-opinions · 1000 examples against slovenian-opinions-chronological" in part
    assert "split by CreatedDateTimeUtc: train 2007-08-21 08:43:00 .. 2015-09-08 18:24:00" in part
    assert "test 2015-10-18 11:43:00 .. 2015-12-22 08:18:41" in part
    # accuracy judges (no class counts stored); macro-F1 is 0.01 below it in every run
    assert cells(part) == [
        ["full", "1e-4", "3"]
        + ["0.720 ± 0.020", "0.640 ± 0.035", "0.080 ± 0.020"]
        + ["0.710 ± 0.020", "0.630 ± 0.035", "0.080 ± 0.020"],
        ["lora(r=8)", "1e-4", "3"]
        + ["0.800 ± 0.010", "0.787 ± 0.012", "0.013 ± 0.006"]
        + ["0.790 ± 0.010", "0.777 ± 0.012", "0.013 ± 0.006"],
    ]
    assert len(IMG.findall(part)) == 1
    assert "drift accuracy" in part and "drift macro-F1" in part


def test_the_example_study_pairs_every_run() -> None:
    """examples/temporal-drift.yaml, planned (not trained): each run has its twin."""
    records = []
    for run in plan_study(load_spec(EXAMPLE), EXAMPLE.parent):
        result = fake_result(run.spec, 60.0)
        result = replace(result, data=replace(result.data, name=run.spec.data))
        records.append(StoredRun(run.run_id, run.study, run.method_label, result))
    assert len(records) == 24
    found = comparisons(read_runs(records))
    assert [(c.method, c.learning_rate, len(c.pairs)) for c in found] == [
        ("full", 2e-5, 3),
        ("houlsby", 1e-3, 3),
        ("lora", 1e-3, 3),
        ("bitfit", 1e-3, 3),
    ]
    assert {c.chronological.data for c in found} == {"slovenian-opinions-chronological"}


@pytest.mark.parametrize(
    "changes",
    [
        {"learning_rate": 3e-4},
        {"train_size": 500},
        {"seed": 7},
        {"model": "other-model"},
        {"method": "bitfit"},
    ],
)
def test_runs_that_differ_in_more_than_the_split_are_not_paired(changes: dict[str, Any]) -> None:
    records = drift_store(**changes)
    assert comparisons(read_runs(records)) == []
    assert '<section id="temporal">' not in render_report(records, title="drift")


def test_a_method_option_is_part_of_what_must_match() -> None:
    records = drift_store()
    row = chronological_row(method="full", seed=0, learning_rate=1e-4, test=0.6)
    row["spec"]["methods"] = [{"name": "lora", "config": {"rank": 4}}]
    records[1] = stored(row)  # full, seed 0 on the chronological split: now lora(r=4)
    (full, _) = comparisons(read_runs(records))
    assert [r.seed for r, _ in full.pairs] == [1, 2]


def test_absent_without_pairs() -> None:
    page = render_report(make_study(), title="plain")
    assert '<section id="temporal">' not in page
    only_later = [r for r in drift_store() if r.result.data.name.endswith("chronological")]
    assert '<section id="temporal">' not in render_report(only_later, title="later")


def test_a_split_option_pairs_with_the_same_entry_split_at_random() -> None:
    """A data file split by a `split: chronological` option: the two sides share the data
    set's name, so the chronological one is marked to keep the report's groups apart."""
    records = []
    for split, score in (("random", 0.8), ("chronological", 0.7)):
        row = make_row(data="comments", test=score)
        row["spec"]["data"] = "/data/comments.csv"
        if split == "chronological":
            row["spec"]["data_options"] = {"split": "chronological", "time_column": "date"}
            row["data"]["time_split"] = {**CUTS, "column": "date"}
            row["run_id"] += "/by-date"
        records.append(stored(row))
    runs = read_runs(records)
    assert [r.setting.data for r in runs] == ["comments", "comments (chronological)"]
    (found,) = comparisons(runs)
    assert found.scores("accuracy")[2] == pytest.approx([0.1])
    page = render_report(records, title="comments")
    assert "<h3>comments (chronological) · 1000 examples</h3>" in section(page, "results")
    assert "split by date: train 2007-08-21" in section(page, "temporal")


def test_runs_stored_without_cut_dates_say_so() -> None:
    records = []
    for record in drift_store():
        data = record.result.to_dict()
        data["data"].pop("time_split", None)
        records.append(
            StoredRun(record.run_id, record.study, record.method_label, RunResult.from_dict(data))
        )
    part = section(render_report(records, title="old"), "temporal")
    assert "not stored with these runs" in part and len(cells(part)) == 2


def test_the_cut_dates_round_trip_and_a_bad_one_is_named() -> None:
    row = chronological_row()
    result = RunResult.from_dict(stored(row).result.to_dict())
    assert result.data.time_split is not None
    assert result.data.time_split.spans().startswith("train 2007-08-21 08:43:00 .. ")
    assert result.to_dict()["data"]["time_split"] == CUTS
    row["data"]["time_split"]["periods"][0]["end"] = "2015"
    with pytest.raises(ConfigError, match=r"periods\[0\]\.end: unknown field"):
        stored(row)


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> str:
    return save_tiny_bert(str(tmp_path_factory.mktemp("tiny-bert")))


def test_two_studies_of_one_file_in_one_store_report_the_drift(model: str, tmp_path: Path) -> None:
    """End to end: the same study on a random and on a chronological split, one store."""
    data = write_dated(tmp_path / "comments.csv")
    store = tmp_path / "drift.db"
    options = {"split": "chronological", "time_column": "date"}
    settings: dict[str, Any] = {"methods": ["bitfit"], "seeds": [0], "max_length": 16}
    random_spec = write_spec(tmp_path, model, data.name, name="comments-random", **settings)
    later_spec = write_spec(
        tmp_path, model, {data.name: options}, name="comments-later", **settings
    )
    with one_thread():
        for spec in (random_spec, later_spec):
            run_study(spec, store_path=store, executor=LocalExecutor(progress=False))
    records = load_records(store)
    later = [r.result for r in records if r.result.spec.data_options]
    assert [r.data.time_split.column for r in later if r.data.time_split] == ["date"]
    part = section(render_report(records, title="comments"), "temporal")
    # write_dated: 100 rows 3 days apart from 2015-01-01; rows 0-79 train, 90-99 test
    day = [(date(2015, 1, 1) + timedelta(days=3 * i)).isoformat() for i in (0, 79, 90, 99)]
    assert f"split by date: train {day[0]} .. {day[1]}" in part
    assert f"test {day[2]} .. {day[3]}." in part
    (row,) = cells(part)
    scores = {bool(r.result.spec.data_options): r.result.test["accuracy"] for r in records}
    assert row[:3] == ["bitfit", "1e-4", "1"]
    assert row[3:6] == [f"{v:.3f} ± 0.000" for v in (scores[False], scores[True])] + [
        f"{scores[False] - scores[True]:.3f} ± 0.000"
    ]
