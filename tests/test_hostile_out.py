"""Odd output paths: `--out ''`, `.`, `/`, `..` name no folder a run or a sequence can be built
beside and renamed into (nor a checkpoint folder named after), and a quoted `~` would make a
folder named `~` here. Each is one line, exit 1, nothing on disk changed; a path ending in `/`
is the folder it names."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from cli_cases import refused, run_cli, unchanged, write_reviews
from study_helpers import one_run_store

NAMELESS = "ends in no name of its own"
UNEXPANDED = "starts with '~', which only a shell expands"
UP_OUT_OF_NOTHING = "goes up ('..') out of runs, which does not exist"
ODD = {
    "empty": ("", NAMELESS),
    "here": (".", NAMELESS),
    "root": ("/", NAMELESS),
    "up": ("..", NAMELESS),
    "up-out-of-nothing": ("runs/..", UP_OUT_OF_NOTHING),
    "through-nothing": ("runs/../first", UP_OUT_OF_NOTHING),
    "home": ("~", UNEXPANDED),
    "under-home": ("~/runs/x", UNEXPANDED),
}


@pytest.fixture
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    write_reviews(tmp_path / "reviews.csv")
    write_reviews(tmp_path / "topics.csv")
    (tmp_path / "notes.txt").write_text("mine\n")
    return tmp_path


def train_args(model: Path, out: str, *extra: str) -> list[str]:
    return [
        "train", "--model", str(model), "--data", "reviews.csv", "--method", "bitfit",
        "--epochs", "1", "--device", "cpu", "--no-progress", "--out", out, *extra,
    ]  # fmt: skip


def sequence_args(model: Path, out: str) -> list[str]:
    return [
        "sequence", "--model", str(model), "--stages", "reviews.csv,topics.csv",
        "--method", "bitfit", "--epochs", "1", "--no-single-stage", "--device", "cpu",
        "--no-progress", "--out", out,
    ]  # fmt: skip


@pytest.mark.parametrize("case", ODD)
@pytest.mark.parametrize("extra", [[], ["--overwrite"], ["--checkpoint-every", "1"]])
def test_train_refuses_an_out_without_a_name_of_its_own(
    case: str, extra: list[str], work: Path, tiny_model: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out, needle = ODD[case]
    root = os.listdir("/")
    with unchanged(work):
        refused(train_args(tiny_model, out, *extra), capsys, "--out", needle)
    assert os.listdir("/") == root


@pytest.mark.parametrize("case", ODD)
def test_sequence_refuses_an_out_without_a_name_of_its_own(
    case: str, work: Path, tiny_model: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out, needle = ODD[case]
    with unchanged(work):
        refused(sequence_args(tiny_model, out), capsys, "--out", needle)


def test_an_out_ending_in_a_slash_is_the_folder_it_names(
    work: Path, tiny_model: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run_cli(train_args(tiny_model, "runs/first/"), capsys)
    assert code == 0, err
    assert (work / "runs" / "first" / "metrics.json").is_file()


REPORT = ["study", "report", "s.db", "-o"]
RANK = ["rank", "--models", "{model}", "--data", "reviews.csv"]
EXPORT = ["export", "--adapter", "{trained}"]
ANALYZE = ["analyze", "rsa", "--adapter", "{trained}", "--data", "reviews.csv", "--out"]
OTHERS = {
    "report-home": ([*REPORT, "~/report.html"], UNEXPANDED),
    "report-up-out-of-nothing": ([*REPORT, "runs/.."], UP_OUT_OF_NOTHING),
    "report-up": ([*REPORT, "here/.."], "report here/.. is a folder"),
    "rank-json-home": ([*RANK, "--json", "~/r.json"], UNEXPANDED),
    "rank-json-up-out-of-nothing": ([*RANK, "--json", "runs/.."], UP_OUT_OF_NOTHING),
    "rank-controls-home": ([*RANK, "--write-controls", "~/c"], UNEXPANDED),
    "rank-controls-through-nothing": ([*RANK, "--write-controls", "runs/../c"], UP_OUT_OF_NOTHING),
    "export-home": ([*EXPORT, "~/peft"], UNEXPANDED),
    "export-through-nothing": ([*EXPORT, "runs/../peft"], UP_OUT_OF_NOTHING),
    "analyze-home": ([*ANALYZE, "~/a"], UNEXPANDED),
    "analyze-up-out-of-nothing": ([*ANALYZE, "runs/.."], UP_OUT_OF_NOTHING),
}


@pytest.mark.parametrize("case", OTHERS)
def test_other_outputs_refuse_odd_paths(
    case: str,
    work: Path,
    tiny_model: Path,
    trained: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    args, needle = OTHERS[case]
    one_run_store(work)
    (work / "here").mkdir()
    filled = [arg.format(model=tiny_model, trained=trained) for arg in args]
    with unchanged(work):
        refused(filled, capsys, needle)
    assert not (work / "~").exists() and not (work / "runs").exists()
