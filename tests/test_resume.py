"""`--checkpoint-every` and `--resume`: a run killed with SIGKILL mid-epoch and resumed ends with
the weights and scores of a run never stopped; a checkpoint is resumed only when asked, and
only by the run that wrote it."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from cli_cases import refused, run_cli, write_reviews
from safetensors.torch import load_file
from tiny_models import save_tiny_bert

from adaptlab.engine.training_checkpoint import STATE, checkpoint_folder, training_checkpoint
from adaptlab.errors import ConfigError


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("resume")
    return {
        "root": root,
        "model": Path(save_tiny_bert(str(root / "tiny-bert"))),  # dropout on: RNG state matters
        "reviews": write_reviews(root / "reviews.csv", rows=60),
    }


def train_args(setup: dict[str, Path], out: Path, *extra: str) -> list[str]:
    return [
        "train", "--model", str(setup["model"]), "--data", str(setup["reviews"]),
        "--method", "houlsby", "--epochs", "8", "--batch-size", "4", "--learning-rate", "1e-3",
        "--device", "cpu", "--out", str(out), "--no-progress", *extra,
    ]  # fmt: skip


def test_a_killed_run_resumes_to_the_weights_of_an_unbroken_one(
    setup: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    unbroken, resumed = setup["root"] / "unbroken", setup["root"] / "resumed"
    assert run_cli(train_args(setup, unbroken), capsys)[0] == 0
    command = [
        sys.executable,
        "-m",
        "adaptlab",
        *train_args(setup, resumed, "--checkpoint-every", "3"),
    ]
    run = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    state = checkpoint_folder(resumed) / STATE
    try:
        step = _wait_for_checkpoint(state, after_step=20)
        run.kill()  # SIGKILL: nothing is cleaned up
        run.wait(timeout=30)
    finally:
        run.kill()
    assert not resumed.exists(), "the run finished before it was killed"
    assert step % 13 != 0, "killed at an epoch's end, not inside one"  # 49 examples, batch 4

    code, _, err = run_cli(train_args(setup, resumed, "--resume"), capsys)
    assert code == 0, err
    assert not checkpoint_folder(resumed).exists()  # removed once the run is written
    assert "resumed at epoch" in (resumed / "train.log").read_text()
    one, two = (load_file(str(r / "adapter" / "adapter.safetensors")) for r in (unbroken, resumed))
    assert one.keys() == two.keys()
    for name, tensor in one.items():
        torch.testing.assert_close(two[name], tensor, rtol=1e-5, atol=1e-7, msg=name)
    first, second = (json.loads((r / "metrics.json").read_text()) for r in (unbroken, resumed))
    assert second["best_epoch"] == first["best_epoch"]
    assert second["test_loss"] == pytest.approx(first["test_loss"], rel=1e-5)
    for a, b in zip(first["epochs"], second["epochs"], strict=True):
        assert (b["step"], b["dev_loss"]) == (a["step"], pytest.approx(a["dev_loss"], rel=1e-5))
        assert b["train_loss"] == pytest.approx(a["train_loss"], rel=1e-5)


def _wait_for_checkpoint(state: Path, after_step: int, timeout: float = 120.0) -> int:
    """The step of the first checkpoint written after `after_step` steps."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            step = int(json.loads(state.read_text())["position"]["step"])
        except (OSError, ValueError, KeyError):
            step = 0
        if step > after_step:
            return step
        time.sleep(0.02)
    raise AssertionError(f"no checkpoint after step {after_step} within {timeout} s")


def test_a_checkpoint_is_resumed_only_when_asked_and_only_by_its_run(
    setup: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    out = setup["root"] / "asked"
    folder = checkpoint_folder(out)
    folder.mkdir(parents=True)
    (folder / STATE).write_text(json.dumps({"spec": {"model": "another"}, "every": 3}))
    refused(train_args(setup, out), capsys, "holds the checkpoint of an unfinished run", "--resume")
    refused(train_args(setup, out, "--resume"), capsys, "is of another run")
    refused(train_args(setup, setup["root"] / "none", "--resume"), capsys, "no checkpoint at")
    refused(train_args(setup, out, "--checkpoint-every", "0"), capsys, "--checkpoint-every")
    code, _, err = run_cli(train_args(setup, out, "--overwrite", "--epochs", "1"), capsys)
    assert code == 0, err
    assert not folder.exists()


def test_a_checkpoint_names_only_its_own_files_and_overwrite_deletes_only_them(
    tmp_path: Path,
) -> None:
    folder = checkpoint_folder(tmp_path / "run")
    folder.mkdir()
    (tmp_path / "secret.safetensors").write_bytes(b"not the checkpoint's")
    state = dict.fromkeys(
        ("spec", "data_digest", "every", "position", "epochs", "best_epoch", "best_score",
         "skipped", "optimizer_groups", "scheduler", "scaler"), 0,
    )  # fmt: skip
    (folder / STATE).write_text(
        json.dumps(state | {"spec": {}, "tensors": "../secret.safetensors"})
    )
    with pytest.raises(ConfigError, match="tensors: '../secret.safetensors' is not a tensor file"):
        training_checkpoint(tmp_path / "run", {}, "data.csv", None, resume=True, overwrite=False)

    (folder / "notes.txt").write_text("the user's")
    with pytest.raises(ConfigError, match="holds notes.txt, which are no checkpoint's files"):
        training_checkpoint(tmp_path / "run", {}, "data.csv", None, resume=False, overwrite=True)
    assert (folder / "notes.txt").exists() and (tmp_path / "secret.safetensors").exists()
    (folder / "notes.txt").unlink()
    checkpoint = training_checkpoint(
        tmp_path / "run", {}, "data.csv", None, resume=False, overwrite=True
    )
    assert checkpoint is not None and not checkpoint.exists()  # replaced, not resumed
    assert (folder / STATE).exists()  # kept until the new run ends
    checkpoint.remove()
    assert not folder.exists()  # only its own files: removed
