"""Helpers for the bad-input tests: run the CLI as a user would, check that an error is one
line, and check that nothing on disk changed."""

from __future__ import annotations

import csv
import hashlib
import json
import random
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from adaptlab.cli.app import main
from adaptlab.engine.training_checkpoint import STATE, checkpoint_folder
from adaptlab.records.config import TrainConfig
from adaptlab.runs.run import RunSpec, execute

WORDS = {"fresh": ["great", "lovely", "superb", "fun"], "rotten": ["dull", "awful", "bad"]}

Snapshot = dict[str, tuple[str, str]]
RUN_FILES = ["adapter", "metrics.json", "splits.json", "train.log"]


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """Exit status, stdout and stderr of `adaptlab ARGS`."""
    with pytest.raises(SystemExit) as done:
        main([*args])
        raise SystemExit(0)
    out, err = capsys.readouterr()
    return int(done.value.code or 0), out, err


def refused(args: list[str], capsys: pytest.CaptureFixture[str], *needles: str) -> str:
    """Run `adaptlab ARGS`, which must fail with exit 1 and one `error:` line holding every
    needle (no traceback); the line comes back."""
    code, _, err = run_cli(args, capsys)
    lines = err.strip().splitlines()
    assert code == 1, err
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


def killed_at_checkpoint(args: list[str], out: Path, step: int) -> None:
    """`adaptlab ARGS --out OUT` in a child process checkpointing every step, killed once its
    checkpoint reaches `step`: OUT is not written, only its checkpoint."""
    options = ["--out", str(out), "--checkpoint-every", "1"]
    command = [sys.executable, "-m", "adaptlab", *args, *options]
    run = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    state = checkpoint_folder(out) / STATE
    try:
        deadline = time.monotonic() + 180
        while not state.exists() or json.loads(state.read_text())["position"]["step"] < step:
            assert time.monotonic() < deadline and run.poll() is None, "no checkpoint"
            time.sleep(0.05)
        run.kill()
        run.wait(timeout=30)
    finally:
        run.kill()
    assert not out.exists()


def snapshot(folder: Path) -> Snapshot:
    """Every file and folder under `folder` with its kind and content hash."""
    found: Snapshot = {}
    for path in sorted(folder.rglob("*")):
        if path.is_symlink() or path.is_dir():
            found[str(path.relative_to(folder))] = ("dir", "")
        elif path.is_file():
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
            found[str(path.relative_to(folder))] = ("file", digest)
    return found


@contextmanager
def unchanged(folder: Path) -> Iterator[None]:
    """Assert that the block leaves everything under `folder` as it was."""
    before = snapshot(folder)
    yield
    assert snapshot(folder) == before


def write_reviews(path: Path, rows: int = 60) -> Path:
    """A learnable two-class CSV (the label decides the words)."""
    rng = random.Random(0)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(["text", "label"])
        for i in range(rows):
            label = "fresh" if i % 2 else "rotten"
            writer.writerow([f"a {rng.choice(WORDS[label])} film", label])
    return path


def train_run(model: str, data: Path, out: Path) -> Path:
    """A finished one-epoch run folder at `out`."""
    train = TrainConfig(epochs=1, batch_size=16, learning_rate=1e-3, seed=0)
    execute(RunSpec.build(model, str(data), "bitfit", train=train), out, progress=False)
    return out


def copy_tree(source: Path, target: Path) -> Path:
    shutil.copytree(source, target)
    return target


@contextmanager
def read_only(folder: Path) -> Iterator[Path]:
    """`folder` made read-only for this process: mode 0555, and for root (whom modes do not
    stop) the immutable attribute; the test is skipped where neither holds."""
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o555)
    immutable = False
    try:
        if _writable(folder):
            immutable = _chattr("+i", folder)
            if not immutable or _writable(folder):
                pytest.skip("cannot make a folder read-only here (root without chattr)")
        yield folder
    finally:
        if immutable:
            _chattr("-i", folder)
        folder.chmod(0o755)


def _writable(folder: Path) -> bool:
    probe = folder / ".probe"
    try:
        probe.write_text("x")
    except OSError:
        return False
    probe.unlink()
    return True


def _chattr(flag: str, folder: Path) -> bool:
    try:
        done = subprocess.run(["chattr", flag, str(folder)], capture_output=True, check=False)
    except FileNotFoundError:
        return False
    return done.returncode == 0
