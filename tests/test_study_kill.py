"""The core promise: stop `study run` with Ctrl-C or kill -9, run it again, and it completes."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from study_helpers import integrity, one_thread, rows, write_reviews, write_spec
from tiny_models import save_tiny_bert

from adaptlab.errors import ConfigError
from adaptlab.study.executors import LocalExecutor
from adaptlab.study.runner import run_study
from adaptlab.study.status import study_status

# Ctrl-C raises KeyboardInterrupt in the child even when this test runs with SIGINT ignored
# (a job started in the background by a non-interactive shell), as it does at a terminal.
COMMAND = (
    "import signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
    "from adaptlab.cli.study_cmd import app; app(sys.argv[1:])"
)


def start(spec: Path, log: Path) -> subprocess.Popen[bytes]:
    """`adaptlab study run SPEC` in a child process, output to `log`."""
    with log.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-c", COMMAND, "run", str(spec), "--no-progress"],
            env={**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"},
            stdout=out,
            stderr=subprocess.STDOUT,
        )


def wait_for(store: Path, process: subprocess.Popen[bytes], done: int) -> None:
    """Poll the store until at least `done` runs are done and another one is running."""
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        assert process.poll() is None, "the study ended before it could be stopped"
        try:
            with sqlite3.connect(store) as db:
                statuses = [s for (s,) in db.execute("SELECT status FROM runs")]
        except sqlite3.OperationalError:  # no store or no schema yet
            statuses = []
        if statuses.count("done") >= done and "running" in statuses:
            return
        time.sleep(0.02)
    raise AssertionError("the study did not get going in time")


def done_rows(store: Path) -> dict[str, str]:
    return {run_id: finished for run_id, status, finished, _ in rows(store) if status == "done"}


def test_ctrl_c_and_kill_9_then_the_same_command_finishes_without_duplicates(
    tmp_path: Path,
) -> None:
    model = save_tiny_bert(str(tmp_path / "tiny-bert"))
    data = write_reviews(tmp_path / "reviews.csv", rows=200)
    spec = write_spec(tmp_path, model, str(data), methods=["full", "lora", "bitfit"], epochs=2)
    store = tmp_path / "tiny.db"

    process = start(spec, tmp_path / "first.log")  # Ctrl-C
    try:
        wait_for(store, process, done=1)
        process.send_signal(signal.SIGINT)
        process.wait(timeout=60)
    finally:
        process.kill()
    assert process.returncode != 0
    assert "stopped after" in (tmp_path / "first.log").read_text()
    first = done_rows(store)
    assert 1 <= len(first) < 6 and integrity(store) == "ok"

    process = start(spec, tmp_path / "second.log")  # kill -9
    try:
        wait_for(store, process, done=len(first) + 1)
        with pytest.raises(ConfigError, match=f"in use by another .* \\(pid {process.pid} on "):
            run_study(spec, executor=LocalExecutor(progress=False))
        os.kill(process.pid, signal.SIGKILL)
    finally:
        process.kill()
        process.wait()
    assert process.returncode == -signal.SIGKILL
    second = done_rows(store)
    assert len(first) < len(second) < 6
    assert all(second[run_id] == finished for run_id, finished in first.items())
    (status,) = study_status(store)
    assert (status.interrupted, status.running, status.left) == (1, 0, 6 - len(second))
    assert status.mean_seconds and status.eta_seconds == status.mean_seconds * status.left

    with one_thread():
        summary = run_study(spec, executor=LocalExecutor(progress=False))
    assert len(summary.outcomes) == 6 - len(second) and not summary.failed
    after = rows(store)
    assert len(after) == 6 and {status for _, status, _, _ in after} == {"done"}
    assert all(done_rows(store)[run_id] == finished for run_id, finished in second.items())
    assert integrity(store) == "ok"
