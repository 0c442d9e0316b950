"""`adaptlab analyze` options outside what makes sense are refused before any model loads, and a
result with a NaN or infinite number is refused in one line with nothing written. Inputs
unchanged byte for byte."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import torch
from cli_cases import refused, train_run, unchanged, write_reviews
from tiny_models import save_tiny_bert

import adaptlab.analysis.api as analysis_api
import adaptlab.analysis.similarity as similarity
from adaptlab.analysis.landscape import Landscape


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding a tiny BERT, a reviews file and a bitfit run trained on them."""
    folder = tmp_path_factory.mktemp("work")
    model = save_tiny_bert(str(folder / "bert"))
    train_run(model, write_reviews(folder / "reviews.csv"), folder / "run")
    return folder


def analyze(work: Path, kind: str, out: Path, *extra: str) -> list[str]:
    return ["analyze", kind, "--adapter", str(work / "run"), "--data", str(work / "reviews.csv"),
            "--model", str(work / "bert"), "--out", str(out), "--no-progress", *extra]  # fmt: skip


@pytest.fixture
def no_model(monkeypatch: pytest.MonkeyPatch) -> None:
    """Loading the run fails the test: these options must be refused first."""

    def loaded(*args: object, **kwargs: object) -> None:
        raise AssertionError("the analysis loaded a model before checking its options")

    monkeypatch.setattr(analysis_api, "load_target", loaded)


@pytest.mark.parametrize(
    ("kind", "options", "message"),
    [
        ("landscape", ["--span", "1e308"],
         "--span must be from 0.01 to 100 (alpha counts training steps"),
        ("landscape", ["--span", "0.001"], "--span must be from 0.01 to 100"),
        ("landscape", ["--points", "100000"],
         "--points must be at most 200 (each point is one pass"),
        ("rsa", ["--tokens", "2"], "--tokens must be at least 3 for rsa, got 2"),
        ("cka", ["--debiased", "--tokens", "3"], "--tokens must be at least 4 for cka-debiased"),
    ],
    ids=["huge-span", "tiny-span", "many-points", "rsa", "debiased-cka"],
)  # fmt: skip
def test_options_out_of_bounds_are_refused_before_a_model_loads(
    kind: str,
    options: list[str],
    message: str,
    work: Path,
    no_model: None,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    with unchanged(work):
        refused(analyze(work, kind, tmp_path / "out", *options), capsys, message)
    assert not (tmp_path / "out").exists()


def test_a_landscape_that_diverges_is_refused_and_not_written(
    work: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    measured = analysis_api.loss_landscape

    def overflowing(*args: Any, **kwargs: Any) -> Landscape:
        """The real curve, its farthest points overflowed as a model's loss far out does."""
        curve = measured(*args, **kwargs)
        pairs = zip(curve.alphas, curve.losses, strict=True)
        losses = [math.inf if abs(a) >= 2 else loss for a, loss in pairs]
        losses[1] = math.nan
        return Landscape(curve.alphas, tuple(losses))

    monkeypatch.setattr(analysis_api, "loss_landscape", overflowing)
    with unchanged(work):
        refused(
            analyze(work, "landscape", tmp_path / "out", "--points", "5"),
            capsys,
            "the loss landscape diverged (loss inf at alpha -2, nan at alpha -1, inf at alpha 2)",
            "lower --span",
        )
    assert not (tmp_path / "out" / "landscape.json").exists()


def test_representations_that_are_not_finite_are_refused(
    work: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    captured = similarity.base_and_adapted

    def diverged(*args: Any, **kwargs: Any) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """The real representations, the adapted model's layer 1 holding a NaN."""
        base, adapted = captured(*args, **kwargs)
        adapted[1][0, 0] = math.nan
        return base, adapted

    monkeypatch.setattr(similarity, "base_and_adapted", diverged)
    with unchanged(work):
        refused(
            analyze(work, "rsa", tmp_path / "out", "--tokens", "10"),
            capsys,
            "the adapted model's representations hold NaN or infinite values",
        )
    assert not (tmp_path / "out" / "rsa.json").exists()
