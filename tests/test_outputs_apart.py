"""An output never touches an input: a path equal to, inside or holding any input of the
command (data, base model, stacked or fused adapter, results store and the files beside it) is
refused, `--out` is never a symbolic link, and `--overwrite` replaces only an earlier output of
the same kind. One line, exit 1, every file unchanged byte for byte."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from cli_cases import copy_tree, refused, run_cli, unchanged, write_reviews
from study_helpers import one_run_store


@pytest.fixture
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tiny_model: Path, trained: Path) -> Path:
    """The current folder: a data file, a base model folder and two earlier runs."""
    monkeypatch.chdir(tmp_path)
    write_reviews(tmp_path / "reviews.csv")
    copy_tree(tiny_model, tmp_path / "model")
    copy_tree(trained, tmp_path / "runs" / "a")
    copy_tree(trained, tmp_path / "runs" / "b")
    return tmp_path


def train_args(*extra: str) -> list[str]:
    return ["train", "--model", "model", "--data", "reviews.csv", "--epochs", "1"] + [
        "--no-progress",
        *extra,
    ]


# --- train -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "out, needle",
    [
        ("runs/a", "--out runs/a is the stacked adapter runs/a"),
        ("runs/a/new", "--out runs/a/new is inside the stacked adapter runs/a"),
    ],
    ids=["same", "inside"],
)
def test_a_run_never_writes_over_the_adapter_it_stacks_on(
    out: str, needle: str, work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with unchanged(work):
        refused(train_args("--stack", "runs/a", "--out", out, "--overwrite"), capsys, needle)


def test_a_fusion_never_writes_over_an_adapter_it_fuses(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with unchanged(work):
        refused(
            train_args("--method", "fusion", "--adapters", "runs/a,runs/b")
            + ["--out", "runs/b", "--overwrite"],
            capsys,
            "--out runs/b is the fused adapter runs/b",
        )


def test_a_run_never_writes_into_its_model(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with unchanged(work):
        refused(
            train_args("--out", "model/run"), capsys, "--out model/run is inside the base model"
        )


def test_a_run_folder_holding_the_data_is_never_replaced(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An earlier run folder into which the data file was put is not replaced, with it."""
    write_reviews(work / "runs" / "a" / "analysis" / "reviews.csv")
    with unchanged(work):
        refused(
            ["train", "--model", "model", "--data", "runs/a/analysis/reviews.csv"]
            + ["--out", "runs/a", "--overwrite", "--no-progress"],
            capsys,
            "--out runs/a holds the data runs/a/analysis/reviews.csv",
        )


@pytest.mark.parametrize("target", ["runs/a", "nowhere"], ids=["earlier-run", "dangling"])
def test_out_that_is_a_symbolic_link_is_refused(
    target: str, work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    os.symlink(target, work / "link")
    with unchanged(work):
        refused(
            train_args("--out", "link", "--overwrite"),
            capsys,
            f"--out link is a symbolic link (to {target})",
        )
    assert os.readlink(work / "link") == target


def test_a_link_above_out_is_followed(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Only the last part of --out may not be a link: a linked parent folder is fine."""
    (work / "disk").mkdir()
    os.symlink("disk", work / "linked")
    code, _, err = run_cli(train_args("--out", "linked/run"), capsys)
    assert code == 0, err
    assert (work / "disk" / "run" / "metrics.json").is_file()


# --- sequence --------------------------------------------------------------------------------


def sequence_args(*extra: str) -> list[str]:
    return ["sequence", "--model", "model", "--stages", "reviews.csv,other.csv"] + [
        "--epochs",
        "1",
        "--no-progress",
        *extra,
    ]


def test_a_sequence_never_writes_over_its_stage_data(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_reviews(work / "other.csv")
    with unchanged(work):
        refused(sequence_args("--out", "other.csv", "--overwrite"), capsys, "other.csv is a file")
        refused(
            sequence_args("--out", "model/seq"), capsys, "--out model/seq is inside the base model"
        )


def test_sequence_overwrite_replaces_only_an_earlier_sequence(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_reviews(work / "other.csv")
    (work / "mine").mkdir()
    (work / "mine" / "notes.txt").write_text("keep me\n")
    with unchanged(work):
        refused(
            sequence_args("--out", "mine", "--overwrite"),
            capsys,
            "--overwrite replaces only an earlier sequence folder (sequence.json)",
        )
        refused(
            sequence_args("--out", "runs/a", "--overwrite"),
            capsys,
            "--overwrite replaces only an earlier sequence folder",
        )
    code, _, err = run_cli(sequence_args("--out", "seq"), capsys)
    assert code == 0, err
    code, _, err = run_cli(sequence_args("--out", "seq", "--overwrite"), capsys)
    assert code == 0, err
    assert sorted(p.name for p in (work / "seq").iterdir()) == ["sequence.json"]


# --- study report ----------------------------------------------------------------------------


@pytest.fixture
def store(work: Path) -> Path:
    """A results store with one finished run."""
    return one_run_store(work)


@pytest.mark.parametrize("suffix", ["-wal", "-shm", "-journal", ".lock"])
def test_a_report_never_takes_the_place_of_a_file_beside_its_store(
    suffix: str, store: Path, work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = f"s.db{suffix}"
    with unchanged(work):
        refused(
            ["study", "report", "s.db", "-o", target],
            capsys,
            f"report {target} is the results store's file",
        )
    assert not (work / target).exists() or suffix == ".lock"


# --- rank ------------------------------------------------------------------------------------


def test_write_controls_never_writes_into_a_folder_the_user_had(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (work / "mine").mkdir()
    (work / "mine" / "notes.txt").write_text("keep me\n")
    with unchanged(work):
        refused(
            ["rank", "--models", "model@reinit", "--write-controls", "mine"],
            capsys,
            "the control models folder mine exists and is not empty",
        )
        refused(
            ["rank", "--models", "model@reinit", "--write-controls", "model/controls"],
            capsys,
            "the control models folder model/controls is inside the base model model",
        )


def test_rank_json_never_lands_in_an_input(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with unchanged(work):
        refused(
            ["rank", "--models", "model", "--data", "reviews.csv", "--json", "model/rank.json"],
            capsys,
            "rank result model/rank.json is inside the base model model",
        )


# --- export and import -----------------------------------------------------------------------


def test_export_and_import_never_write_into_what_they_read(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with unchanged(work):
        refused(
            ["export", "--adapter", "runs/a", "runs/a/peft"],
            capsys,
            "export folder runs/a/peft is inside the adapter runs/a",
        )
        refused(
            ["import", "runs/a", "runs/a/imported", "--model", "model", "--labels", "a,b"],
            capsys,
            "adapter folder runs/a/imported is inside the PEFT folder runs/a",
        )


def test_a_store_never_lands_in_a_model_folder_of_its_study(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (work / "s.yaml").write_text(
        "name: s\nmodels: [model]\ndata: [reviews.csv]\nmethods: [bitfit]\nepochs: 1\n"
    )
    with unchanged(work):
        refused(
            ["study", "run", "s.yaml", "--store", "model/s.db", "--no-progress"],
            capsys,
            "results store model/s.db is inside the base model",
        )


# --- analyses and knowledge neurons: only new, empty or their own folders ---------------------


def test_an_analysis_never_mixes_its_files_into_a_folder_it_did_not_make(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (work / "mine").mkdir()
    (work / "mine" / "notes.txt").write_text("keep me\n")
    args = ["analyze", "rsa", "--adapter", "runs/a", "--data", "reviews.csv", "--out"]
    with unchanged(work):
        refused(
            [*args, "mine"],
            capsys,
            "the analysis folder mine holds notes.txt, which adaptlab did not write there",
        )
        refused(
            [*args, "runs/a/adapter/plots"],
            capsys,
            "the analysis folder runs/a/adapter/plots is inside the adapter runs/a/adapter",
        )
        refused(
            [*args, "model/plots", "--model", "model"],
            capsys,
            "the analysis folder model/plots is inside the base model model",
        )


def test_an_analysis_adds_to_a_folder_of_earlier_analyses(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["analyze", "rsa", "--adapter", "runs/a", "--data", "reviews.csv", "--model", "model"]
    args += ["--tokens", "12"]
    for out in (["--out", "plots"], []):  # a folder of its own, then the default runs/a/analysis
        for measure in ("rsa", "cka"):
            code, _, err = run_cli([*args[:1], measure, *args[2:], *out], capsys)
            assert code == 0, err
    for folder in (work / "plots", work / "runs" / "a" / "analysis"):
        assert sorted(p.name for p in folder.iterdir()) == [
            "cka.json",
            "cka.png",
            "rsa.json",
            "rsa.png",
        ]


def test_neurons_find_never_writes_into_a_folder_it_did_not_make(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (work / "facts.json").write_text('{"capital": [["France", "Paris"]]}')
    args = ["neurons", "find", "--model", "model", "--facts", "facts.json"]
    args += ["--relation", "capital", "--out"]
    with unchanged(work):
        refused([*args, "."], capsys, "--out . holds the facts facts.json")
        refused([*args, "runs"], capsys, "--out runs holds a, b, which adaptlab did not write")
        refused([*args, "model/neurons"], capsys, "--out model/neurons is inside the model model")
