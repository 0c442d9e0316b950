"""Text that a user or a file supplies is never read as console markup: file and folder
names, labels, texts, method labels and model names holding `[/x]` or `[bold red]` print as
written (before, `[/x]` crashed rich with a MarkupError and `[bold red]` vanished)."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_cases import refused, run_cli, train_run, write_reviews
from tiny_models import save_tiny_bert

from adaptlab.study import ResultStore
from adaptlab.study.planner import plan_study
from adaptlab.study.spec import load_spec

CLOSE = "[/x]"
STYLE = "[bold red]"


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("models") / f"tiny{CLOSE}{STYLE}"
    return Path(save_tiny_bert(str(folder)))


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_reviews(tmp_path_factory.mktemp("data") / f"{STYLE}reviews.csv")


@pytest.fixture(scope="module")
def trained(tiny_model: Path, data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run folder whose path holds both kinds of markup (`[/x]` makes a folder `[`)."""
    return train_run(str(tiny_model), data, tmp_path_factory.mktemp("runs") / f"r{CLOSE}{STYLE}")


@pytest.fixture
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


def marked_csv(path: Path) -> Path:
    """Labels and texts full of markup."""
    lines = ["text,label"] + [f"t{i} {CLOSE} {STYLE},{CLOSE}lab{i % 2}" for i in range(20)]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path


def test_data_show_prints_labels_texts_and_names_as_written(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    marked_csv(work / f"reviews{CLOSE}.csv")
    code, out, err = run_cli(["data", "show", f"reviews{CLOSE}.csv"], capsys)
    assert code == 0, err
    assert f"reviews{CLOSE}" in out and f"{CLOSE}lab0" in out and f"t0 {CLOSE} {STYLE}" in out


def test_data_show_of_a_folder_named_with_markup(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    marked_csv(work / f"{CLOSE}data{STYLE}" / "train.csv")
    code, out, err = run_cli(["data", "show", f"{CLOSE}data{STYLE}"], capsys)
    assert code == 0, err
    assert f"{CLOSE}data{STYLE}" in out


def test_error_messages_keep_the_markup_of_the_names_they_quote(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (work / f"{STYLE}x.csv").write_text("text,lbl\na,pos\n")
    refused(["data", "show", f"{STYLE}x.csv"], capsys, f"not found in {STYLE}x.csv")
    refused(["data", "show", f"{CLOSE}.csv"], capsys, f"{CLOSE}.csv")


def test_train_eval_and_analysis_print_paths_as_written(
    trained: Path, tiny_model: Path, data: Path, work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["--adapter", str(trained), "--data", str(data), "--model", str(tiny_model)]
    code, out, err = run_cli(["eval", *base], capsys)
    assert code == 0 and f"r{CLOSE}" in out, err
    code, out, err = run_cli(
        ["analyze", "landscape", *base, "--points", "2", "--out", f"out{CLOSE}", "--no-progress"],
        capsys,
    )
    assert code == 0 and f"out{CLOSE}/landscape.json" in out, err
    code, out, err = run_cli(
        ["train", "--model", str(tiny_model), "--data", str(data), "--out", f"run{STYLE}"]
        + ["--epochs", "1", "--no-progress"],
        capsys,
    )
    assert code == 0 and f"written to run{STYLE}" in out, err
    code, out, err = run_cli(["methods", "--model", str(tiny_model)], capsys)
    assert code == 0 and f"methods on {tiny_model}"[:40] in out.replace("\n", ""), err


def test_rank_prints_candidate_names_as_written(
    tiny_model: Path, work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = write_reviews(work / "reviews.csv")
    code, out, err = run_cli(
        ["rank", "--models", str(tiny_model), "--data", str(data), "--sample", "40"]
        + ["--estimators", "logme", "--no-progress", "--no-cache"],
        capsys,
    )
    assert code == 0, err
    assert f"ranking by logme: {tiny_model}" in out


def test_study_status_and_report_print_labels_and_names_as_written(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = work / "s.yaml"
    spec.write_text(
        "name: s\nmodels: [minilm-l6]\ndata: [rotten-tomatoes]\n"
        f"methods: [{{method: lora, label: '{CLOSE}lora{STYLE}'}}]\n"
    )
    runs = plan_study(load_spec(spec), work)
    with ResultStore(work / f"s{CLOSE}.db") as results:
        results.set_plan("s", runs)
        results.start(runs[0])
        results.fail(runs[0].run_id, f"broke on {STYLE}x{CLOSE}")
    code, out, err = run_cli(["study", "status", f"s{CLOSE}.db"], capsys)
    assert code == 0, err
    assert f"{CLOSE}lora{STYLE}" in out and f"broke on {STYLE}x{CLOSE}" in out
    refused(["study", "report", f"s{CLOSE}.db"], capsys, "no result records to report on")
