"""A run remembers the contents of its data file, not only its path: `study run` after the file
changed says so in one line (before, it answered "all runs are done" with results of the old
data), `study status` shows it, and `--rerun-changed` runs those runs again. And `study status`
and `study report` agree on which runs count, naming the done runs a spec no longer has."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from cli_cases import refused, run_cli, write_reviews
from study_helpers import save_spec
from test_report_records import make_record
from tiny_models import save_tiny_bert

from adaptlab.data.identity import content_digest
from adaptlab.study import ResultStore
from adaptlab.study.planner import PlannedRun, plan_study
from adaptlab.study.spec import load_spec


def write_spec(folder: Path, model: str, methods: list[Any]) -> Path:
    spec = {
        "name": "s",
        "models": [model],
        "data": ["reviews.csv"],
        "methods": methods,
        "epochs": 1,
        "batch_size": 16,
    }
    return save_spec(folder / "s.yaml", spec)


def finish(store: Path, runs: list[PlannedRun]) -> None:
    """Store `runs` as done (without training them)."""
    with ResultStore(store) as results:
        results.set_plan(runs[0].study, runs)
        for run in runs:
            results.start(run)
            results.finish(run.run_id, make_record(study=run.study, method=run.method_label).result)


def rows(store: Path) -> list[tuple[Any, ...]]:
    with sqlite3.connect(store) as db:
        found = db.execute("SELECT * FROM runs ORDER BY run_id").fetchall()
        found += db.execute("SELECT * FROM planned ORDER BY run_id").fetchall()
    db.close()
    return found


@pytest.fixture
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    write_reviews(tmp_path / "reviews.csv")
    return tmp_path


def test_the_digest_follows_contents_not_names(work: Path) -> None:
    data = work / "reviews.csv"
    first = content_digest(str(data))
    assert first is not None and content_digest(str(data)) == first
    (work / "copy.csv").write_bytes(data.read_bytes())
    assert content_digest(str(work / "copy.csv")) == first
    data.write_text(data.read_text() + "one more row,fresh\n")
    assert content_digest(str(data)) not in (None, first)
    folder = work / "splits"
    folder.mkdir()
    (folder / "train.csv").write_bytes(data.read_bytes())
    (folder / "notes.md").write_text("not data")
    before = content_digest(str(folder))
    (folder / "notes.md").write_text("still not data")
    assert content_digest(str(folder)) == before
    (folder / "test.csv").write_text("text,label\nx,fresh\n")
    assert content_digest(str(folder)) != before
    for source in ("rotten-tomatoes", "hf:imdb", str(work / "missing.csv")):
        assert content_digest(source) is None


def test_changed_data_is_refused_named_and_shown(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = write_spec(work, "minilm-l6", ["lora", "bitfit"])
    runs = plan_study(load_spec(spec), work)
    finish(work / "s.db", runs)
    code, out, err = run_cli(["study", "run", "s.yaml", "--no-progress"], capsys)
    assert code == 0 and "all 2 runs are done" in out, err
    before = rows(work / "s.db")
    data = work / "reviews.csv"
    data.write_text(data.read_text().replace("great", "grand"))
    refused(
        ["study", "run", "s.yaml", "--no-progress"],
        capsys,
        f"{data} changed since 2 done runs of study s trained on it",
        "pass --rerun-changed",
    )
    assert rows(work / "s.db") == before
    code, out, err = run_cli(["study", "status", "s.db"], capsys)
    assert code == 0, err
    assert "data changed under 2 done runs since they ran" in out
    assert runs[0].run_id in out and "--rerun-changed" in out


def test_rerun_changed_runs_them_again_on_the_new_contents(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = save_tiny_bert(str(work / "model"))
    spec = write_spec(work, model, ["bitfit"])
    code, out, err = run_cli(["study", "run", "s.yaml", "--no-progress"], capsys)
    assert code == 0, err
    write_reviews(work / "reviews.csv", rows=80)
    code, out, err = run_cli(["study", "run", "s.yaml", "--no-progress", "--rerun-changed"], capsys)
    assert code == 0 and "1 to run" in out, err
    code, out, err = run_cli(["study", "status", "s.db"], capsys)
    assert code == 0 and "data changed" not in out, err
    with ResultStore(work / "s.db") as results:
        (stored,) = results.records()
        digests = results.data_digests()
    assert sum(stored.result.data.sizes.values()) == 80  # trained on the new contents
    (run,) = plan_study(load_spec(spec), work)
    assert digests == {run.run_id: content_digest("reviews.csv")}


def test_runs_of_older_stores_without_a_digest_are_not_flagged(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = write_spec(work, "minilm-l6", ["lora"])
    finish(work / "s.db", plan_study(load_spec(spec), work))
    with sqlite3.connect(work / "s.db") as db:
        db.execute("UPDATE runs SET data_digest = NULL")
    db.close()
    (work / "reviews.csv").write_text("text,label\nother,fresh\n")
    code, out, err = run_cli(["study", "run", "s.yaml", "--no-progress"], capsys)
    assert code == 0 and "all 1 runs are done" in out, err


def test_status_and_report_agree_after_an_arm_is_removed(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = write_spec(work, "minilm-l6", ["lora", "bitfit", "houlsby"])
    runs = plan_study(load_spec(spec), work)
    finish(work / "s.db", runs)
    write_spec(work, "minilm-l6", ["lora", "bitfit"])  # houlsby removed
    code, out, err = run_cli(["study", "run", "s.yaml", "--no-progress"], capsys)
    assert code == 0 and "all 2 runs are done" in out, err
    removed = f"houlsby ({runs[2].run_id})"
    code, status, err = run_cli(["study", "status", "s.db"], capsys)
    assert code == 0, err
    assert "1 done run is no longer in the spec" in status and removed in status
    assert "│       2 │    2 │" in status  # planned 2, done 2
    code, report, err = run_cli(["study", "report", "s.db"], capsys)
    assert code == 0, err
    assert "1 done run is no longer in the spec" in report and removed in report
    assert "report of 2 runs written" in report
