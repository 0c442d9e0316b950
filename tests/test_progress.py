"""Progress written to something that is not a terminal (a log file, CI, nohup): plain lines,
one per epoch in training and one per tenth elsewhere, never carriage-return bar updates."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from cli_cases import run_cli, write_reviews
from tiny_models import save_tiny_bert

from adaptlab.progress import Progress, track


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_pipe_gets_one_line_per_tenth() -> None:
    stream = io.StringIO()
    bar = Progress(250, "features", "batch", stream=stream)
    for _ in range(250):
        bar.update()
    bar.close()
    lines = stream.getvalue().splitlines()
    assert "\r" not in stream.getvalue()
    assert len(lines) == 10
    assert lines[0].startswith("features: 25/250 batches (10%)")
    assert lines[-1].startswith("features: 250/250 batches (100%)")


def test_lines_only_where_marked_and_the_values_shown() -> None:
    stream = io.StringIO()
    bar = Progress(30, unit="step", lines=0, stream=stream)
    for epoch in (1, 2, 3):
        bar.describe(f"epoch {epoch}/3")
        for _ in range(10):
            bar.update()
            bar.show(loss="0.5")
        bar.show(loss="0.4", dev_accuracy="0.9")
        bar.line()
    bar.close()
    lines = stream.getvalue().splitlines()
    assert [line.split(",")[0] for line in lines] == [
        "epoch 1/3: 10/30 steps (33%)",
        "epoch 2/3: 20/30 steps (66%)",
        "epoch 3/3: 30/30 steps (100%)",
    ]
    assert all(", loss=0.4, dev_accuracy=0.9, " in line for line in lines)


def test_a_terminal_gets_the_live_bar_and_disabled_gets_nothing() -> None:
    terminal, silent = Terminal(), io.StringIO()
    for stream, enabled in ((terminal, True), (silent, False)):
        bar = Progress(50, "x", stream=stream, enabled=enabled)
        for _ in range(50):
            bar.update()
        bar.line()
        bar.close()
    assert "\r" in terminal.getvalue() and "50/50" in terminal.getvalue()
    assert silent.getvalue() == ""


def test_track_passes_every_item_through(capsys: pytest.CaptureFixture[str]) -> None:
    assert list(track(range(7), "points", "point")) == list(range(7))
    err = capsys.readouterr().err
    assert err.splitlines()[-1].startswith("points: 7/7 points (100%)")
    assert "\r" not in err


def test_train_to_a_log_file_writes_one_plain_line_per_epoch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = save_tiny_bert(str(tmp_path / "model"))
    data = write_reviews(tmp_path / "reviews.csv")
    capsys.readouterr()  # what saving the model printed
    code, _, err = run_cli(
        ["train", "--model", model, "--data", str(data), "--out", str(tmp_path / "run")]
        + ["--epochs", "3", "--batch-size", "8"],
        capsys,
    )
    assert code == 0, err
    lines = [line for line in err.splitlines() if line.startswith("epoch ")]
    assert "\r" not in err
    assert [line.split(":")[0] for line in lines] == ["epoch 1/3", "epoch 2/3", "epoch 3/3"]
    assert all("dev_accuracy=" in line for line in lines)
