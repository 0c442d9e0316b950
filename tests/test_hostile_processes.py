"""Several processes (`--nproc`) asked for badly: more than the machine holds, a count that is
no count, a command line or an output the processes would refuse. Each ends in one line before
any process starts, and nothing on disk changes. A mistake only the processes can find is still
one line, and processes whose launcher was killed end with it, writing nothing."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Protocol

import psutil
import pytest
import torch
from cli_cases import refused, run_cli, train_run, unchanged, write_reviews

import adaptlab.engine.process_group as process_group
from adaptlab.cpus import cpu_budget
from adaptlab.engine.launched import ERRORS_VARIABLE, read_errors, recorded_errors
from adaptlab.engine.process_group import check_process_count
from adaptlab.errors import ConfigError


@pytest.fixture
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    write_reviews(tmp_path / "reviews.csv")
    write_reviews(tmp_path / "topics.csv")
    return tmp_path


@pytest.fixture
def no_launch(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """Launches are recorded instead of started: what `launch_processes` was asked to run."""
    launched: list[list[str]] = []

    def launch(count: int, arguments: list[str]) -> None:
        launched.append([str(count), *arguments])

    monkeypatch.setattr(process_group, "launch_processes", launch)
    return launched


def train_args(model: Path, out: str | Path, *extra: str) -> list[str]:
    return [
        "train", "--model", str(model), "--data", "reviews.csv", "--method", "lora",
        "--epochs", "1", "--batch-size", "8", "--device", "cpu", "--no-progress",
        "--out", str(out), *extra,
    ]  # fmt: skip


def sequence_args(model: Path, out: str | Path, *extra: str) -> list[str]:
    return [
        "sequence", "--model", str(model), "--stages", "reviews.csv,topics.csv",
        "--method", "lora", "--epochs", "1", "--no-single-stage", "--device", "cpu",
        "--no-progress", "--out", str(out), *extra,
    ]  # fmt: skip


COMMANDS = {"train": train_args, "sequence": sequence_args}


class RefuseLaunch(Protocol):
    """`adaptlab COMMAND ... --out OUT OPTIONS`, which must fail in one line holding every
    needle."""

    def __call__(self, command: str, out: str, options: list[str], *needles: str) -> None: ...


@pytest.fixture
def refuse_launch(
    work: Path, tiny_model: Path, no_launch: list[list[str]], capsys: pytest.CaptureFixture[str]
) -> RefuseLaunch:
    """A refusal before any process starts: nothing launched, nothing in `work` changed."""

    def run(command: str, out: str, options: list[str], *needles: str) -> None:
        with unchanged(work):
            refused(COMMANDS[command](tiny_model, out, *options), capsys, *needles)
        assert no_launch == []

    return run


# --- how many processes --------------------------------------------------------------------


@pytest.mark.parametrize("command", COMMANDS)
def test_more_processes_than_cores_are_refused_before_any_starts(
    command: str, refuse_launch: RefuseLaunch
) -> None:
    cores = cpu_budget().cpus
    for count in (cores + 1, 1000, 10**30):
        needle = f"--nproc {count} is more processes than the {cores} CPUs"
        refuse_launch(command, "out", ["--nproc", str(count)], needle)


def test_oversubscribe_lets_processes_share_the_cores(
    work: Path, tiny_model: Path, no_launch: list[list[str]], capsys: pytest.CaptureFixture[str]
) -> None:
    count = str(cpu_budget().cpus + 1)
    args = train_args(tiny_model, "out", "--nproc", count, "--oversubscribe")
    code, _, err = run_cli(args, capsys)
    assert code == 0, err
    assert len(no_launch) == 1 and no_launch[0][0] == count
    assert "--nproc" not in no_launch[0] and "--oversubscribe" in no_launch[0]


def test_a_gpu_each_and_no_more(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    check_process_count(2, torch.device("cuda"), oversubscribe=False)
    for oversubscribe in (False, True):
        with pytest.raises(ConfigError, match="a GPU of its own and this machine has 2"):
            check_process_count(3, torch.device("cuda"), oversubscribe=oversubscribe)


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("count", ["0", "-1", "-1000"])
def test_no_processes_is_refused(command: str, count: str, refuse_launch: RefuseLaunch) -> None:
    refuse_launch(command, "out", ["--nproc", count], "--nproc")


@pytest.mark.parametrize("count", ["abc", "", "1.5", "2e3"])
def test_a_count_that_is_no_integer_is_a_usage_error(
    count: str, work: Path, tiny_model: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with unchanged(work):
        code, _, err = run_cli(train_args(tiny_model, "out", "--nproc", count), capsys)
    assert code == 2 and "--nproc" in err


# --- every check before the processes start --------------------------------------------------


@pytest.fixture
def earlier(work: Path, tiny_model: Path) -> dict[str, Path]:
    """An earlier run, an earlier sequence and a user's folder, in `work`."""
    run = train_run(str(tiny_model), work / "reviews.csv", work / "run")
    mine = work / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine\n")
    sequence = work / "sequence"
    sequence.mkdir()
    (sequence / "sequence.json").write_text(json.dumps({"matrix": []}))
    return {"run": run, "sequence": sequence, "mine": mine}


@pytest.mark.parametrize(
    "command, out, extra, needle",
    [
        ("train", "run", [], "it holds an earlier run: pass --overwrite"),
        ("train", "mine", ["--overwrite"], "--overwrite replaces only an earlier run folder"),
        ("train", "out", ["--resume"], "--resume: no checkpoint"),
        ("train", "reviews.csv", [], "is a file, not a folder"),
        ("train", "out", ["--shard", "--checkpoint-every", "1"], "--shard does not combine"),
        ("train", ".", [], "ends in no name of its own"),
        ("sequence", "sequence", [], "output folder sequence exists and is not empty"),
        ("sequence", "mine", ["--overwrite"], "replaces only an earlier sequence folder"),
        ("sequence", "/", [], "ends in no name of its own"),
    ],
    ids=[
        "train-earlier-run",
        "train-overwrite-mine",
        "train-resume-nothing",
        "train-out-a-file",
        "train-shard-checkpoint",
        "train-out-here",
        "sequence-earlier",
        "sequence-overwrite-mine",
        "sequence-out-root",
    ],
)
def test_outputs_are_checked_once_before_any_process_starts(
    command: str,
    out: str,
    extra: list[str],
    needle: str,
    earlier: dict[str, Path],
    refuse_launch: RefuseLaunch,
) -> None:
    refuse_launch(command, out, ["--nproc", "2", *extra], needle)


def test_a_mistake_only_the_processes_find_is_one_line(work: Path, tiny_model: Path) -> None:
    # a bf16 base under --shard mixes dtypes, which each process finds once its model is built
    args = train_args(tiny_model, work / "out", "--nproc", "2", "--shard", "--precision", "bf16")
    args += ["--base-dtype", "bf16"]
    with unchanged(work):
        done = subprocess.run(
            [sys.executable, "-m", "adaptlab", *args], capture_output=True, text=True, timeout=300
        )
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 1, done.stderr
    assert len(lines) == 1 and lines[0].startswith("error: --shard needs one dtype"), done.stderr


def test_a_process_leaves_its_error_for_the_launcher(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ERRORS_VARIABLE, str(tmp_path))
    monkeypatch.setenv("RANK", "1")
    with pytest.raises(SystemExit) as ended, recorded_errors():
        raise RuntimeError("Connection closed by peer")
    assert ended.value.code == 1
    [error] = read_errors(tmp_path)
    assert error.rank == 1 and not error.user
    assert "RuntimeError: Connection closed by peer" in error.trace
    monkeypatch.setenv("RANK", "0")
    with pytest.raises(SystemExit), recorded_errors():
        raise ConfigError("--out x exists")
    assert [(e.rank, e.user) for e in read_errors(tmp_path)] == [(1, False), (0, True)]


# --- processes end with their launcher --------------------------------------------------------


def test_a_process_ends_with_the_process_it_follows(tmp_path: Path) -> None:
    starter = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    follower = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"import time; from adaptlab.processes import end_with; end_with({starter.pid}); "
            "print('following', flush=True); time.sleep(120)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert follower.stdout is not None and follower.stdout.readline() == "following\n"
        starter.kill()
        starter.wait()
        assert follower.wait(timeout=10) == -signal.SIGKILL
    finally:
        starter.kill()
        follower.kill()


def test_a_process_of_a_dead_starter_ends_at_once() -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    follower = subprocess.Popen(
        [sys.executable, "-c", f"from adaptlab.processes import end_with; end_with({gone.pid})"]
    )
    assert follower.wait(timeout=30) == -signal.SIGKILL


def test_killing_the_launcher_ends_its_processes_and_writes_nothing(
    work: Path, tiny_model: Path
) -> None:
    out = work / "out"
    args = train_args(tiny_model, out, "--nproc", "2", "--epochs", "400")
    launcher = subprocess.Popen(
        [sys.executable, "-m", "adaptlab", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        workers = _training_workers(launcher.pid, count=2)
        os.kill(launcher.pid, signal.SIGKILL)
        launcher.wait()
        deadline = time.monotonic() + 10
        while any(map(_running, workers)) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(map(_running, workers))
    finally:
        launcher.kill()
    assert not out.exists()
    assert sorted(p.name for p in work.iterdir() if not p.name.startswith(".")) == [
        "reviews.csv",
        "topics.csv",
    ]


def _training_workers(launcher: int, count: int, timeout: float = 120.0) -> list[psutil.Process]:
    """The `count` processes `launcher` started, once each has begun to train."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready = []
        for child in psutil.Process(launcher).children(recursive=True):
            try:
                if "RANK" in child.environ() and child.cpu_times().user > 3.0:
                    ready.append(child)
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
        if len(ready) == count:
            return ready
        time.sleep(0.2)
    raise AssertionError(f"{count} processes did not start training within {timeout} s")


def _running(process: psutil.Process) -> bool:
    """Whether `process` still runs (one that ended but is not yet reaped does not)."""
    try:
        return process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
