"""Paths a user gives and the overwrite rules: one line, exit 1, and nothing on disk changed.

Inputs that are folders, model folders that lack a part (pickle weights are never loaded),
`train --overwrite` only ever replacing an earlier run folder, and what a killed or refused
command leaves behind (staging folders, lock files).
"""

from __future__ import annotations

import os
import pickle
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest
from cli_cases import RUN_FILES, copy_tree, refused, run_cli, train_run, unchanged, write_reviews

from adaptlab.fileio import STAGING_OWNER, remove_dead_staging, staging_folder
from adaptlab.study.lock import lock_path


@pytest.fixture
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working folder (the current one) holding a data file and an unrelated file."""
    monkeypatch.chdir(tmp_path)
    write_reviews(tmp_path / "reviews.csv")
    (tmp_path / "notes.txt").write_text("mine\n")
    return tmp_path


def model_folder(tiny_model: Path, target: Path, *keep: str) -> Path:
    """A copy of the tiny model folder with only the files named in `keep`."""
    target.mkdir()
    for name in keep:
        shutil.copy(tiny_model / name, target / name)
    return target


class Payload:
    """A pickle that creates a file when it is loaded."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[Path]]:
        return (Path.touch, (self.marker,))


# --- inputs --------------------------------------------------------------------------------


def test_a_folder_given_to_predict_input_is_named_as_a_folder(
    trained: Path, work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (work / "texts").mkdir()
    with unchanged(work):
        refused(
            ["predict", "--adapter", str(trained), "--input", "texts"],
            capsys,
            "--input texts is a folder, not a file",
        )
        refused(["predict", "--adapter", str(trained), "--input", "nope.txt"], capsys, "not found")


def test_a_folder_given_as_study_spec_or_store_is_named_as_a_folder(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (work / "studies").mkdir()
    with unchanged(work):
        refused(["study", "run", "studies"], capsys, "study spec studies is a folder")
        refused(["study", "status", "studies"], capsys, "studies is a folder, not a results store")
        refused(["study", "report", "studies"], capsys, "studies is a folder, not a results store")
        refused(["study", "status", "reviews.csv"], capsys, "not an adaptlab results store")


def test_an_adapter_path_that_is_a_file_is_one_line(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with unchanged(work):
        refused(["eval", "--adapter", "reviews.csv", "--data", "reviews.csv"], capsys, "manifest")


@pytest.mark.parametrize(
    "keep, message",
    [
        ((), "the folder is empty"),
        (("model.safetensors", "tokenizer.json"), "the folder has no config.json"),
        (("config.json", "tokenizer.json", "tokenizer_config.json"), "no *.safetensors weights"),
        (("config.json", "model.safetensors"), "the folder has no tokenizer files"),
    ],
    ids=["empty", "no-config", "no-weights", "no-tokenizer"],
)
@pytest.mark.parametrize("command", ["train", "rank", "methods"])
def test_a_model_folder_that_lacks_a_part_says_which(
    keep: tuple[str, ...],
    message: str,
    command: str,
    tiny_model: Path,
    work: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    folder = model_folder(tiny_model, work / "model", *keep)
    args = {
        "train": ["train", "--model", "model", "--data", "reviews.csv", "--out", "run"],
        "rank": ["rank", "--models", "model", "--data", "reviews.csv", "--sample", "20"],
        "methods": ["methods", "--model", "model"],
    }[command]
    with unchanged(work):
        refused([*args, "--no-progress"] if command != "methods" else args, capsys, message)
    assert folder.is_dir()


def test_pickle_weights_are_refused_and_never_loaded(
    tiny_model: Path, work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = model_folder(tiny_model, work / "model", "config.json", "tokenizer.json")
    marker = work / "pickle-ran"
    (folder / "pytorch_model.bin").write_bytes(pickle.dumps(Payload(marker)))
    with unchanged(work):
        refused(
            ["train", "--model", "model", "--data", "reviews.csv", "--out", "run"],
            capsys,
            "only pickle weights (pytorch_model.bin), which adaptlab does not load",
        )
    assert not marker.exists()


# --- train --out and --overwrite ---------------------------------------------------------


def test_overwrite_never_deletes_a_folder_that_is_not_a_run(
    tiny_model: Path, work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    victim = work / "victim"
    victim.mkdir()
    shutil.copy(work / "reviews.csv", victim / "mydata.csv")
    (victim / "unrelated.txt").write_text("keep me\n")
    with unchanged(work):
        refused(
            ["train", "--model", str(tiny_model), "--data", "victim/mydata.csv"]
            + ["--out", "victim", "--overwrite", "--no-progress"],
            capsys,
            "--overwrite replaces only an earlier run folder",
            "mydata.csv, unrelated.txt",
        )


def test_overwrite_leaves_a_run_folder_holding_other_files(
    tiny_model: Path, trained: Path, work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = copy_tree(trained, work / "run")
    (run / "results-I-care-about.csv").write_text("1,2\n")
    with unchanged(work):
        refused(
            ["train", "--model", str(tiny_model), "--data", "reviews.csv"]
            + ["--out", "run", "--overwrite", "--no-progress"],
            capsys,
            "holds an earlier run and also results-I-care-about.csv",
        )


@pytest.mark.parametrize("overwrite", [[], ["--overwrite"]], ids=["plain", "overwrite"])
def test_out_naming_a_file_is_refused(
    overwrite: list[str], tiny_model: Path, work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with unchanged(work):
        refused(
            ["train", "--model", str(tiny_model), "--data", "reviews.csv", "--out", "notes.txt"]
            + overwrite,
            capsys,
            "--out notes.txt is a file, not a folder",
        )


def test_an_earlier_run_needs_overwrite_and_then_is_replaced(
    tiny_model: Path, trained: Path, work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = copy_tree(trained, work / "run")
    (run / "analysis").mkdir()
    (run / "analysis" / "rsa.json").write_text("{}")
    args = ["train", "--model", str(tiny_model), "--data", "reviews.csv", "--out", "run"]
    args += ["--method", "lora", "--epochs", "1", "--no-progress"]
    with unchanged(work):
        refused(args, capsys, "it holds an earlier run: pass --overwrite to replace it")
    code, out, err = run_cli([*args, "--overwrite"], capsys)
    assert code == 0, err
    assert sorted(p.name for p in run.iterdir()) == RUN_FILES
    assert '"lora"' in (run / "metrics.json").read_text()
    assert (work / "notes.txt").read_text() == "mine\n"


def test_write_controls_never_writes_into_an_existing_model_folder(
    tiny_model: Path, work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    models = work / "models"
    copy_tree(tiny_model, models / "tiny")
    with unchanged(work):
        refused(
            ["rank", "--models", "models/tiny", "--write-controls", "models", "--no-progress"],
            capsys,
            "control model folder models/tiny exists and is not empty",
        )


# --- leftovers -----------------------------------------------------------------------------


def dead_pid() -> int:
    """The pid of a process that has exited."""
    done = subprocess.Popen(["true"])
    done.wait()
    return done.pid


def test_a_killed_runs_staging_folder_is_removed_by_the_next_run(
    tiny_model: Path, work: Path
) -> None:
    killed = staging_folder(work / "run")  # what kill -9 during `train` leaves
    (killed / "train.log").write_text("epoch 1\n")
    host = (killed / STAGING_OWNER).read_text().split()[0]
    (killed / STAGING_OWNER).write_text(f"{host} {dead_pid()}\n")
    alive = staging_folder(work / "other")  # a run still going (this process)
    foreign = work / ".old.partial-x"  # no owner: not ours to judge
    foreign.mkdir()
    train_run(str(tiny_model), work / "reviews.csv", work / "run")
    assert not killed.exists()
    assert alive.is_dir() and foreign.is_dir()
    assert sorted(p.name for p in (work / "run").iterdir()) == [
        "adapter",
        "metrics.json",
        "splits.json",
        "train.log",
    ]
    assert remove_dead_staging(work) == []


def test_a_refused_store_leaves_no_lock_file_and_no_change(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = work / "s.yaml"
    spec.write_text("name: s\nmodels: [minilm-l6]\ndata: [reviews.csv]\nmethods: [lora]\n")
    other = work / "other.db"
    with sqlite3.connect(other) as db:
        db.execute("CREATE TABLE t (x)")
    db.close()
    with unchanged(work):
        refused(["study", "run", "s.yaml", "--store", "reviews.csv"], capsys, "not an SQLite")
        refused(
            ["study", "run", "s.yaml", "--store", "other.db"],
            capsys,
            "other.db is an SQLite database of another program",
        )
        refused(["study", "run", "s.yaml", "--store", "."], capsys, "is a folder")
    assert not lock_path(work / "reviews.csv").exists()
    assert not os.path.exists(lock_path(other))


@pytest.mark.parametrize("name", ["reviews.csv", "./reviews.csv"])
def test_a_file_given_as_model_is_named_as_a_file(
    name: str, work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with unchanged(work):
        refused(
            ["train", "--model", name, "--data", "reviews.csv", "--out", "run"],
            capsys,
            f"cannot load model '{name}': it is a file; a model is a folder",
        )
