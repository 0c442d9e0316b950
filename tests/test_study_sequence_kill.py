"""kill -9 a sequence study between stages and within one: the same command goes on from the
last finished stage, never training a finished stage again, and ends where an uninterrupted
study ends."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest
from sequence_study_helpers import write_sequence_spec, write_stages
from study_helpers import integrity, one_thread
from test_study_kill import start
from tiny_models import save_tiny_bert

from adaptlab.study.executors import LocalExecutor
from adaptlab.study.kind_sequences import sequence_folders
from adaptlab.study.runner import run_study
from adaptlab.study.store import ResultStore, load_sequences


def stage_rows(store: Path) -> dict[tuple[str, int], tuple[str, str]]:
    """(run id, stage) -> (finished_at, record) of every stored stage."""
    try:
        with sqlite3.connect(store) as db:
            rows = db.execute("SELECT run_id, stage, finished_at, record FROM stages").fetchall()
    except sqlite3.OperationalError:  # no store or no schema yet
        return {}
    return {(run_id, stage): (finished, record) for run_id, stage, finished, record in rows}


def kill_after(store: Path, process: subprocess.Popen[bytes], stages: int, wait: float) -> None:
    """SIGKILL `process` `wait` seconds after the store holds `stages` finished stages."""
    deadline = time.monotonic() + 180
    while len(stage_rows(store)) < stages:
        assert process.poll() is None, "the study ended before it could be stopped"
        assert time.monotonic() < deadline, "the study did not get going in time"
        time.sleep(0.02)
    time.sleep(wait)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    assert process.returncode == -signal.SIGKILL


def test_kill_9_between_and_within_stages_resumes_from_the_last_finished_stage(
    tmp_path: Path,
) -> None:
    model = save_tiny_bert(str(tmp_path / "tiny-bert"))
    stages = write_stages(tmp_path, rows=300)
    keys = {"strategies": [{"replay": {"rate": 0.1}}], "epochs": 2}
    spec = write_sequence_spec(tmp_path, model, stages, **keys)
    store = tmp_path / "cl.db"

    process = start(spec, tmp_path / "first.log")
    try:
        kill_after(store, process, stages=1, wait=0.0)  # between stages 1 and 2
    finally:
        process.kill()
    first = stage_rows(store)
    ((run_id, _),) = first
    assert (sequence_folders(store) / run_id / "stage-0").is_dir()

    process = start(spec, tmp_path / "second.log")
    try:
        kill_after(store, process, stages=len(first) + 1, wait=0.1)  # within the next stage
    finally:
        process.kill()
    second = stage_rows(store)
    assert "resumed after stage 1/3" in (tmp_path / "second.log").read_text()
    assert len(second) == 2 and all(second[key] == row for key, row in first.items())
    kept = sorted(p.name for p in (sequence_folders(store) / run_id).iterdir())
    assert kept == ["stage-1"]  # killed while stage 3 trained
    assert integrity(store) == "ok"

    with one_thread():
        summary = run_study(spec, executor=LocalExecutor(progress=False))
    (outcome,) = summary.outcomes
    assert outcome.result is not None
    final = stage_rows(store)
    assert len(final) == 3 and all(final[key] == row for key, row in second.items())
    with ResultStore(store, create=False) as results:
        stored = [outcome.record for outcome, _ in results.stages(run_id)]
    assert list(outcome.result.stages) == stored  # records (times included) of the first runs
    assert not (sequence_folders(store) / run_id).exists()

    reference = tmp_path / "reference"
    reference.mkdir()
    with one_thread():
        run_study(
            write_sequence_spec(reference, model, stages, **keys),
            executor=LocalExecutor(progress=False),
        )
    (whole,) = load_sequences(reference / "cl.db")
    assert outcome.result.matrix == whole.result.matrix
    for row, expected in zip(outcome.result.tests, whole.result.tests, strict=True):
        losses = [cell["loss"] for cell in expected]
        assert [cell["loss"] for cell in row] == pytest.approx(losses, abs=1e-5)
