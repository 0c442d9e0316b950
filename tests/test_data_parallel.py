"""One run on two gloo processes (`adaptlab train --nproc 2`, and sharded with `--shard`) ends
where one process ends at the same global batch: the sums over processes are the only
difference (dropout off, so the two runs draw nothing differently). A process that dies stops
the run in one line naming its rank.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import torch
from cli_cases import refused, run_cli, write_reviews
from safetensors.torch import load_file
from tiny_models import save_tiny_bert

from adaptlab.cpus import cpu_budget
from adaptlab.records.config import TrainConfig
from adaptlab.runs.run import RunSpec, execute


def without_dropout(folder: Path) -> Path:
    """The model folder with dropout off, so one and two processes draw nothing differently."""
    config_file = folder / "config.json"
    config = json.loads(config_file.read_text())
    config |= {"hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}
    config_file.write_text(json.dumps(config))
    return folder


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("data-parallel")
    model = without_dropout(Path(save_tiny_bert(str(root / "tiny-bert"))))
    reviews = write_reviews(root / "reviews.csv", rows=50)
    train = TrainConfig(epochs=1, batch_size=8, learning_rate=1e-3, seed=0)
    sources = []
    for name in ("a", "b"):  # adapters a Fuse fuses
        execute(RunSpec.build(str(model), str(reviews), "pfeiffer", train=train), root / name)
        sources.append(str(root / name))
    return {"root": root, "model": model, "reviews": reviews, "sources": Path(",".join(sources))}


def train_args(setup: dict[str, Path], out: Path, method: str, *extra: str) -> list[str]:
    fuse = ["--adapters", str(setup["sources"])] if method == "fusion" else []
    fuse += ["-o", "dropout=0"] if method == "lst" else []  # its side network's dropout
    return [
        "train", "--model", str(setup["model"]), "--data", str(setup["reviews"]),
        "--method", method, *fuse, "--epochs", "2", "--batch-size", "8",
        "--learning-rate", "1e-3", "--device", "cpu", "--out", str(out), "--no-progress", *extra,
    ]  # fmt: skip


@pytest.mark.parametrize("method", ["full", "houlsby", "lora", "fusion", "lst"])
def test_two_processes_train_as_one(
    setup: dict[str, Path], method: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # 41 training examples in batches of 8, split 4 + 4: the last batch holds one example,
    # so the first process's share of it is empty (it runs one example weighed 0)
    one, two = setup["root"] / f"{method}-1", setup["root"] / f"{method}-2"
    assert run_cli(train_args(setup, one, method), capsys)[0] == 0
    code, _, err = run_cli(train_args(setup, two, method, "--nproc", "2"), capsys)
    assert code == 0, err
    alone, shared = (load_file(str(r / "adapter" / "adapter.safetensors")) for r in (one, two))
    assert alone.keys() == shared.keys()
    moved = 0
    for name, tensor in alone.items():
        torch.testing.assert_close(shared[name], tensor, rtol=1e-4, atol=1e-5, msg=name)
        moved += 1
    assert moved
    first, second = (json.loads((r / "metrics.json").read_text()) for r in (one, two))
    assert second["test_loss"] == pytest.approx(first["test_loss"], rel=1e-4, abs=1e-5)
    shared_cpus = max(1, cpu_budget().cpus // 2)  # each process, started fresh, its share
    assert second["threads"]["threads"] == int(os.environ.get("OMP_NUM_THREADS", shared_cpus))
    assert second["threads"]["wait_policy"] == os.environ.get("OMP_WAIT_POLICY", "PASSIVE")
    for epoch_one, epoch_two in zip(first["epochs"], second["epochs"], strict=True):
        assert epoch_two["train_loss"] == pytest.approx(epoch_one["train_loss"], rel=1e-4)
        assert epoch_two["dev_loss"] == pytest.approx(epoch_one["dev_loss"], rel=1e-4, abs=1e-5)


def test_a_killed_process_ends_the_run_in_one_line_and_writes_nothing(
    setup: dict[str, Path],
) -> None:
    out = setup["root"] / "killed"
    args = train_args(setup, out, "lora", "--nproc", "2", "--epochs", "400")
    command = [sys.executable, "-m", "adaptlab", *args]
    run = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        worker = _wait_for_worker(run.pid, rank="1")
        os.kill(worker.pid, signal.SIGKILL)
        _, err = run.communicate(timeout=120)
    finally:
        run.kill()
    assert run.returncode == 1, err
    last = err.strip().splitlines()[-1]
    assert last.startswith("error: process of rank 1 of 2 ended with exit code -9"), err
    assert not out.exists()


def _wait_for_worker(parent: int, rank: str, timeout: float = 90.0) -> psutil.Process:
    """The launched process of `rank` once it has started training (its group is up)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for child in psutil.Process(parent).children(recursive=True):
            try:
                environment = child.environ()
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
            if environment.get("RANK") == rank and child.cpu_times().user > 3.0:
                return child
        time.sleep(0.2)
    raise AssertionError(f"no process of rank {rank} started training within {timeout} s")


def test_a_causal_lm_sequence_on_two_processes_ends_as_on_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # documents of different lengths: the processes' shares hold different token counts
    from test_continual_lm import write_corpus
    from tiny_models import save_tiny_llama

    model = save_tiny_llama(str(tmp_path / "tiny-llama"))  # Llama's dropout is 0
    stages = ",".join(write_corpus(tmp_path, name, documents=30) for name in ("finance", "sport"))

    def sequence(out: Path, *extra: str) -> dict[str, object]:
        args = [
            "sequence", "--objective", "causal-lm", "--model", model, "--stages", stages,
            "--method", "lora", "--strategy", "kd-logit", "--epochs", "1", "--batch-size", "6",
            "--learning-rate", "1e-2", "--max-length", "16", "--no-single-stage",
            "--device", "cpu", "--no-progress", "--out", str(out), *extra,
        ]  # fmt: skip
        code, _, err = run_cli(args, capsys)
        assert code == 0, err
        return json.loads((out / "sequence.json").read_text())

    one, two = sequence(tmp_path / "one"), sequence(tmp_path / "two", "--nproc", "2")
    assert one["metric"] == "perplexity"
    for row_one, row_two in zip(one["matrix"], two["matrix"], strict=True):  # type: ignore[call-overload]
        assert row_two == pytest.approx(row_one, rel=1e-4)


def test_a_sharded_run_trains_as_one_process(
    setup: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    # LoRA in the blocks' units, the pooler and classifier in the root unit
    method = "lora"
    one, two = setup["root"] / f"{method}-1", setup["root"] / f"{method}-sharded"
    if not one.exists():
        assert run_cli(train_args(setup, one, method), capsys)[0] == 0
    code, _, err = run_cli(train_args(setup, two, method, "--nproc", "2", "--shard"), capsys)
    assert code == 0, err
    alone, shared = (load_file(str(r / "adapter" / "adapter.safetensors")) for r in (one, two))
    assert alone.keys() == shared.keys()
    for name, tensor in alone.items():
        torch.testing.assert_close(shared[name], tensor, rtol=1e-4, atol=1e-5, msg=name)
    first, second = (json.loads((r / "metrics.json").read_text()) for r in (one, two))
    assert second["test_loss"] == pytest.approx(first["test_loss"], rel=1e-4, abs=1e-5)


def test_shard_alone_is_refused_in_one_line(
    setup: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    args = train_args(setup, setup["root"] / "alone-sharded", "lora", "--shard")
    refused(args, capsys, "--shard needs several processes")
