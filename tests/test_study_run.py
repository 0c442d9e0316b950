"""`study run` end to end on a tiny model: one row per run, resume, failures, status, CLI."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import typer
from study_helpers import fake_result, integrity, rows, write_reviews, write_spec
from tiny_models import save_tiny_bert

import adaptlab.cli.app as cli_app
from adaptlab.cli import study_cmd
from adaptlab.errors import ConfigError
from adaptlab.records.result import RunResult
from adaptlab.study import executors
from adaptlab.study.executors import LocalExecutor
from adaptlab.study.lock import StoreLock
from adaptlab.study.planner import plan_study, run_id
from adaptlab.study.runner import run_study
from adaptlab.study.spec import load_spec
from adaptlab.study.status import study_status
from adaptlab.study.store import ResultStore, StoredRun, load_records

QUIET = LocalExecutor(progress=False)


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> str:
    return save_tiny_bert(str(tmp_path_factory.mktemp("tiny-bert")))


@pytest.fixture(scope="module")
def reviews(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(write_reviews(tmp_path_factory.mktemp("data") / "reviews.csv"))


@pytest.fixture
def count_runs(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Labels of the runs `execute` is called for, in order."""
    calls: list[str] = []
    real = executors.execute

    def counting(spec: Any, *args: Any, **kwargs: Any) -> RunResult:
        calls.append(spec.methods[0].name)
        return real(spec, *args, **kwargs)

    monkeypatch.setattr(executors, "execute", counting)
    return calls


StudyCli = Callable[[list[str]], tuple[int, str, str]]
SpecWith = Callable[..., Path]


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> StudyCli:
    """`adaptlab study ARGS` through the real entry point: (exit code, stdout, stderr)."""
    app = typer.Typer()
    app.add_typer(study_cmd.app, name="study")
    monkeypatch.setattr(cli_app, "app", app)

    def run(args: list[str]) -> tuple[int, str, str]:
        with pytest.raises(SystemExit) as done:
            cli_app.main(["study", *args])
            raise SystemExit(0)
        out, err = capsys.readouterr()
        return int(done.value.code or 0), out, err

    return run


@pytest.fixture
def spec_with(model: str, reviews: str, tmp_path: Path) -> SpecWith:
    """`write_spec` of the tiny model on the reviews in `tmp_path`, with the keys given."""
    return lambda **keys: write_spec(tmp_path, model, reviews, **keys)


def test_a_study_writes_one_row_per_run_and_resumes_with_nothing_to_do(
    spec_with: SpecWith, tmp_path: Path, count_runs: list[str]
) -> None:
    spec = spec_with(methods=["full", {"houlsby": {"hidden_size": 4}}])
    summary = run_study(spec, executor=QUIET)
    store = tmp_path / "tiny.db"
    assert summary.store == store and summary.planned == 4 and not summary.failed
    records = load_records(store)
    assert len(records) == 4 and len(rows(store)) == 4
    assert sorted(r.method_label for r in records) == ["full"] * 2 + ["houlsby(hidden_size=4)"] * 2
    for record in records:
        result = record.result
        assert record.study == "tiny" and len(record.run_id) == 12
        assert record.run_id == run_id(result.spec)  # the stored spec gives the run's id back
        assert [e.epoch for e in result.epochs] == [1]
        assert result.best_epoch == 1 and "accuracy" in result.test
        assert 0 < result.trainable_parameters <= result.total_parameters
        assert result.adapter_tensor_bytes == 4 * result.trainable_parameters
        assert result.versions.torch and result.host and (result.wall_seconds or 0) > 0
    assert {r.result.spec.train.seed for r in records} == {0, 1}
    before = rows(store)

    count_runs.clear()
    again = run_study(spec, executor=QUIET)
    assert count_runs == [] and again.done_before == 4 and again.outcomes == []
    assert rows(store) == before  # not redone, not duplicated


def test_an_interrupted_run_is_run_again(
    spec_with: SpecWith, tmp_path: Path, count_runs: list[str]
) -> None:
    spec = spec_with(methods=["lora"])
    run_study(spec, executor=QUIET)
    store = tmp_path / "tiny.db"
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True
    )
    dead_pid = int(dead.stdout)
    with sqlite3.connect(store) as db:  # as a kill -9 mid-run leaves it
        db.execute(
            "UPDATE runs SET status = 'running', record = NULL, finished_at = NULL, pid = ? "
            "WHERE run_id = (SELECT MIN(run_id) FROM runs)",
            (dead_pid,),
        )
    (status,) = study_status(store)
    assert (status.done, status.running, status.interrupted, status.left) == (1, 0, 1, 1)

    count_runs.clear()
    run_study(spec, executor=QUIET)
    assert count_runs == ["lora"]
    assert [row[1] for row in rows(store)] == ["done", "done"]
    assert integrity(store) == "ok"


def test_failed_runs_are_recorded_the_study_goes_on_and_a_rerun_retries_them(
    spec_with: SpecWith, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: StudyCli
) -> None:
    spec = spec_with(methods=["bitfit", {"freeze": {"k": 3}}], seeds=[0])
    real = executors.execute
    flaky = {"bitfit": 1}

    def once_failing(run_spec: Any, *args: Any, **kwargs: Any) -> RunResult:
        name = run_spec.methods[0].name
        if flaky.get(name):
            flaky[name] -= 1
            raise ConfigError("bitfit: a passing problem")
        return real(run_spec, *args, **kwargs)

    monkeypatch.setattr(executors, "execute", once_failing)
    code, out, err = cli(["run", str(spec), "--no-progress"])
    assert code == 1
    assert len(err.strip().splitlines()) == 1 and "2 of 2 runs failed" in err
    assert "freeze: k=3 exceeds the 2 blocks" in out and "bitfit: a passing problem" in out
    store = tmp_path / "tiny.db"
    assert sorted(row[3] for row in rows(store)) == [
        "bitfit: a passing problem",
        "freeze: k=3 exceeds the 2 blocks of BertForSequenceClassification",
    ]

    code, out, err = cli(["run", str(spec), "--no-progress"])
    assert code == 1 and "1 of 2 runs failed" in err
    statuses = {row[3] or "": row[1] for row in rows(store)}
    assert sorted(statuses.values()) == ["done", "failed"]
    assert statuses[""] == "done"  # bitfit, retried, now done

    code, out, _ = cli(["status", str(spec)])
    assert code == 0
    assert "study tiny" in out and "freeze(k=3): freeze: k=3 exceeds" in out
    cells = [[c.strip() for c in line.split("│")[1:-1]] for line in out.splitlines() if "│" in line]
    assert cells[0][:5] == ["2", "1", "0", "1", "0"]  # planned, done, running, failed, left
    assert cells[1:] == [["bitfit", "1/1", "0"], ["freeze(k=3)", "0/1", "1"]]


def test_a_second_study_run_on_the_same_store_refuses(spec_with: SpecWith, tmp_path: Path) -> None:
    spec = spec_with()
    with StoreLock(tmp_path / "tiny.db"), pytest.raises(ConfigError) as refused:
        run_study(spec, executor=QUIET)
    assert f"pid {os.getpid()}" in str(refused.value)
    assert not (tmp_path / "tiny.db").exists()


def test_cli_options_and_user_errors_are_one_line(
    spec_with: SpecWith, tmp_path: Path, cli: StudyCli
) -> None:
    spec = spec_with(methods=["lora"], seeds=[3])
    store = tmp_path / "elsewhere" / "results.db"
    code, out, _ = cli(["run", str(spec), "--store", str(store), "--no-progress"])
    assert code == 0 and "run 1/1 lora" in out and store.is_file()
    code, out, _ = cli(["status", str(store)])
    assert code == 0 and "lora" in out
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\nmodels: [m]\ndata: [d]\nmethods: [full]\nseeds: [-1]\n")
    for args, message in [
        (
            ["run", str(bad)],
            "bad.yaml line 5, seeds[0]: input should be greater than or equal to 0",
        ),
        (["status", str(tmp_path / "none.db")], "no results store at"),
        (["run", str(spec), "--address", "auto"], "--address and --ray-cpus need --executor ray"),
    ]:
        code, _, err = cli(args)
        assert code == 1 and message in err and len(err.strip().splitlines()) == 1, err


def test_report_hands_the_stores_records_to_the_report_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: StudyCli
) -> None:
    spec = write_spec(tmp_path, "minilm-l6", "rotten-tomatoes", methods=["lora"], seeds=[0])
    (run,) = plan_study(load_spec(spec), tmp_path)
    store = tmp_path / "tiny.db"
    with ResultStore(store) as results:
        results.set_plan("tiny", [run])
        results.start(run)
        results.finish(run.run_id, fake_result(run.spec, 1.0))
    calls: list[tuple[Any, ...]] = []

    def write_report(
        records: list[StoredRun],
        out: Path,
        *,
        title: str,
        validations: list[Any],
        metric: str | None,
        sequences: list[Any],
    ) -> Path:
        assert sequences == []
        calls.append((records, out, title, validations, metric))
        return out

    fake = SimpleNamespace(write_report=write_report, is_report=lambda path: False)
    monkeypatch.setitem(sys.modules, "adaptlab.report", fake)
    code, out, _ = cli(["report", str(spec)])
    assert code == 0 and f"report of 1 runs written to {tmp_path / 'tiny.html'}" in out
    ((records, out_path, title, validations, metric),) = calls
    assert [(r.run_id, r.study, r.method_label) for r in records] == [(run.run_id, "tiny", "lora")]
    assert (out_path, title, validations, metric) == (tmp_path / "tiny.html", "tiny", [], None)
    cli(
        ["report", str(store), "--out", str(tmp_path / "r.html"), "--title", "T"]
        + ["--metric", "mcc"]
    )
    assert calls[-1][1:] == (tmp_path / "r.html", "T", [], "mcc")


def test_a_metric_the_data_does_not_compute_stops_the_study_after_one_run(
    spec_with: SpecWith, tmp_path: Path, cli: StudyCli
) -> None:
    spec = spec_with(methods=["bitfit"], metric="span_f1")
    code, out, err = cli(["run", str(spec), "--no-progress"])
    said = [line for line in err.strip().splitlines() if not line.startswith("device: ")]
    assert code == 1 and len(said) == 1, err  # beside the device line of the run it trained
    assert "metric 'span_f1' is not computed on reviews (single_label data gives accuracy" in err
    assert "test span_f1 not computed" in out
    assert [row[1] for row in rows(tmp_path / "tiny.db")] == ["done"]  # the run is kept


def test_progress_shows_the_metric_the_study_judges_by(
    spec_with: SpecWith, tmp_path: Path, cli: StudyCli
) -> None:
    spec = spec_with(methods=["bitfit"], seeds=[0], metric="mcc")
    code, out, _ = cli(["run", str(spec), "--no-progress"])
    assert code == 0 and "test mcc " in out
    (stored,) = load_records(tmp_path / "tiny.db")
    assert stored.study_metric == "mcc"
    counts = stored.result.data.train_counts or {}
    assert list(counts) == ["fresh", "rotten"]
    assert sum(counts.values()) == stored.result.data.sizes["train"]
    assert [c.label for c in stored.result.test_classes or ()] == ["fresh", "rotten"]
