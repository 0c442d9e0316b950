"""Output paths, checked before any work: a folder where a file goes, a file where a folder
goes, a folder that cannot be written, and an existing file that adaptlab did not write (the
results store itself above all). One line, exit 1, nothing on disk changed."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_cases import copy_tree, read_only, refused, run_cli, unchanged, write_reviews
from study_helpers import one_run_store

import adaptlab.analysis.api as analysis_api
from adaptlab.study.lock import lock_path


@pytest.fixture
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    write_reviews(tmp_path / "reviews.csv")
    (tmp_path / "notes.txt").write_text("mine\n")
    return tmp_path


@pytest.fixture
def store(work: Path) -> Path:
    """A results store with one finished run."""
    return one_run_store(work)


@pytest.fixture
def no_analysis(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make loading a model for an analysis fail the test: outputs must be refused first."""

    def loaded(*args: object, **kwargs: object) -> None:
        raise AssertionError("the analysis started before its output was checked")

    monkeypatch.setattr(analysis_api, "load_target", loaded)


# --- study report -o -------------------------------------------------------------------------


def test_report_never_overwrites_the_store_it_reports(
    store: Path, work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    copy = work / "copy.db"
    copy.write_bytes(store.read_bytes())
    with unchanged(work):
        refused(["study", "report", "copy.db", "-o", "copy.db"], capsys, "is the results store")
        refused(["study", "report", "copy.db", "-o", "s.db"], capsys, "not an earlier report")


@pytest.mark.parametrize(
    "target, message",
    [
        ("notes.txt", "notes.txt exists and is not an earlier report"),
        ("reviews.csv", "reviews.csv exists and is not an earlier report"),
        (".", "report . is a folder"),
        ("notes.txt/r.html", "notes.txt is a file, not a folder"),
    ],
    ids=["text-file", "data-file", "folder", "under-a-file"],
)
def test_report_refuses_an_output_that_is_not_a_new_file(
    target: str, message: str, store: Path, work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with unchanged(work):
        refused(["study", "report", "s.db", "-o", target], capsys, message)


def test_report_replaces_an_earlier_report(
    store: Path, work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for _ in range(2):
        code, out, err = run_cli(["study", "report", "s.db", "-o", "r.html"], capsys)
        assert code == 0, err
    assert "report of 1 runs written to r.html" in out


def test_report_into_a_read_only_folder_is_refused(
    store: Path, work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with read_only(work / "locked") as locked, unchanged(work):
        refused(["study", "report", "s.db", "-o", f"{locked}/r.html"], capsys, "cannot write")


def test_a_store_in_a_read_only_folder_can_be_read(
    store: Path, work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (work / "locked").mkdir()
    store.rename(work / "locked" / "s.db")
    with read_only(work / "locked"):
        code, out, err = run_cli(["study", "status", "locked/s.db"], capsys)
        assert code == 0 and "study s" in out, err
        code, out, err = run_cli(["study", "report", "locked/s.db", "-o", "r.html"], capsys)
        assert code == 0 and (work / "r.html").is_file(), err
        with unchanged(work / "locked"):
            refused(
                ["study", "run", "s.yaml", "--store", "locked/s.db"],
                capsys,
                "cannot write the results store",
            )
        assert not lock_path(work / "locked" / "s.db").exists()


# --- analyses --------------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["rsa", "cka", "landscape", "fusion"])
def test_analysis_out_naming_a_file_is_refused_before_the_model_loads(
    command: str,
    trained: Path,
    work: Path,
    no_analysis: None,
    capsys: pytest.CaptureFixture[str],
) -> None:
    with unchanged(work):
        refused(
            ["analyze", command, "--adapter", str(trained), "--data", "reviews.csv"]
            + ["--out", "notes.txt"],
            capsys,
            "the analysis folder notes.txt is a file; give a folder",
        )


def test_analysis_never_replaces_a_file_it_did_not_write(
    trained: Path, work: Path, no_analysis: None, capsys: pytest.CaptureFixture[str]
) -> None:
    (work / "out").mkdir()
    (work / "out" / "rsa.json").write_text('{"mine": true}')
    (work / "out" / "landscape.png").write_text("not a picture")
    with unchanged(work):
        refused(
            ["analyze", "rsa", "--adapter", str(trained), "--data", "reviews.csv", "--out", "out"],
            capsys,
            "rsa.json exists and is not an earlier analysis result",
        )
        refused(
            ["analyze", "landscape", "--adapter", str(trained), "--data", "reviews.csv"]
            + ["--out", "out"],
            capsys,
            "landscape.png exists and is not an earlier analysis plot",
        )


def test_analysis_into_a_read_only_folder_is_refused(
    trained: Path, work: Path, no_analysis: None, capsys: pytest.CaptureFixture[str]
) -> None:
    run = copy_tree(trained, work / "run")
    with read_only(run), unchanged(work):
        refused(
            ["analyze", "landscape", "--adapter", "run", "--data", "reviews.csv"],
            capsys,
            "cannot write the analysis folder",
        )


# --- rank and train ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "target, message",
    [
        ("notes.txt", "notes.txt exists and is not an earlier rank result"),
        (".", "rank result . is a folder"),
        ("notes.txt/rank.json", "notes.txt is a file, not a folder"),
    ],
    ids=["unrelated-file", "folder", "under-a-file"],
)
def test_rank_json_is_checked_before_any_model_loads(
    target: str, message: str, work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with unchanged(work):
        refused(
            ["rank", "--models", "nowhere/model", "--data", "reviews.csv", "--json", target],
            capsys,
            message,
        )


def test_rank_outputs_into_read_only_folders_are_refused(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with read_only(work / "locked"), unchanged(work):
        refused(
            ["rank", "--models", "nowhere/model", "--json", "locked/r.json"],
            capsys,
            "cannot write rank result",
        )
        refused(
            ["rank", "--models", "nowhere/model", "--write-controls", "locked"],
            capsys,
            "cannot write the control models",
        )


def test_train_into_a_read_only_folder_is_refused_before_training(
    tiny_model: Path, work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with read_only(work / "locked"), unchanged(work):
        refused(
            ["train", "--model", str(tiny_model), "--data", "reviews.csv"]
            + ["--out", "locked/run", "--no-progress"],
            capsys,
            "cannot write the run folder",
        )


def test_rank_refuses_a_cache_or_store_it_could_not_write_before_any_model_loads(
    store: Path, work: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (work / "locked").mkdir()
    store.rename(work / "locked" / "s.db")
    args = ["rank", "--models", "nowhere/model", "--data", "reviews.csv", "--sample", "20"]
    with read_only(work / "locked"), unchanged(work):
        refused(
            [*args, "--validate", "locked/s.db"],
            capsys,
            "cannot write the agreement into the results store",
        )
        monkeypatch.setenv("ADAPTLAB_CACHE", str(work / "locked"))
        refused(args, capsys, "cannot write the feature cache", "set ADAPTLAB_CACHE")
        monkeypatch.setenv("ADAPTLAB_CACHE", str(work / "locked" / "cache"))
        refused(args, capsys, "cannot make adaptlab's cache folder", "set ADAPTLAB_CACHE")


def test_export_and_import_write_only_new_or_empty_folders(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (work / "taken").mkdir()
    (work / "taken" / "adapter.safetensors").write_bytes(b"someone else's adapter")
    with unchanged(work):
        refused(
            ["export", "--adapter", "nowhere", "taken"],
            capsys,
            "export folder taken exists and is not empty",
        )
        refused(["export", "--adapter", "nowhere", "notes.txt"], capsys, "notes.txt is a file")
        refused(
            ["import", "nowhere", "taken", "--model", "nowhere/m", "--labels", "a,b"],
            capsys,
            "adapter folder taken exists and is not empty",
        )


def test_a_damaged_store_behind_an_sqlite_header_is_one_line(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (work / "s.yaml").write_text(
        "name: s\nmodels: [minilm-l6]\ndata: [rotten-tomatoes]\nmethods: [lora]\n"
    )
    (work / "bad.db").write_bytes(b"SQLite format 3\x00" + bytes(range(256)) * 8)
    with unchanged(work):
        for args in (["run", "s.yaml", "--store"], ["status"], ["report"]):
            refused(["study", *args, "bad.db"], capsys, "bad.db is not an adaptlab results store")
