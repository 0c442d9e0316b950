"""Ranking models: equal scores are shown as ties (never as `A > B` decided by the order the
models were given in), and a sample too small for an estimator is refused before any model
loads, naming the estimators, what they need and the class that falls short."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from cli_cases import refused, run_cli, write_reviews
from tiny_models import save_tiny_bert

from adaptlab.select import Ranking, RankRow
from adaptlab.select.hscore import HScore
from adaptlab.select.knn import KNN
from adaptlab.select.nleep import NLEEP


def ranking(scores: dict[str, float]) -> Ranking:
    rows = tuple(RankRow(name, name, {"logme": score}) for name, score in scores.items())
    return Ranking("d", 10, ("logme",), rows, (), 0.0, 0.0, 0)


def test_equal_scores_are_one_tier_whatever_the_order_given() -> None:
    forward = ranking({"b": 1.0, "a": 1.0, "c": 2.0, "d": 1.0 + 1e-13})
    backward = ranking({"d": 1.0 + 1e-13, "c": 2.0, "a": 1.0, "b": 1.0})
    assert forward.tiers("logme") == [["c"], ["a", "b", "d"]]
    assert backward.tiers("logme") == forward.tiers("logme")
    assert forward.order("logme") == ["c", "a", "b", "d"]
    assert ranking({"a": 1.0, "b": 1.1}).tiers("logme") == [["b"], ["a"]]


def test_what_each_estimator_needs_of_every_class() -> None:
    assert HScore().needed_per_class() == 2  # a class mean and a spread
    assert KNN(k=5).needed_per_class() == 4  # 3 of 5 neighbours from the class, itself aside
    assert KNN(k=1).needed_per_class() == 2
    assert NLEEP(components_per_class=5).needed_per_class() == 6  # more than its components


@pytest.fixture(scope="module")
def twins(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Two copies of one model: every estimator must score them equal."""
    first = Path(save_tiny_bert(str(tmp_path_factory.mktemp("m") / "alpha")))
    second = first.parent / "beta"
    shutil.copytree(first, second)
    return first, second


def test_identical_models_rank_as_a_tie_in_either_order(
    twins: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = write_reviews(tmp_path / "reviews.csv", rows=80)
    outputs = []
    for first, second in (twins, twins[::-1]):
        code, out, err = run_cli(
            ["rank", "--models", f"{first},{second}", "--data", str(data), "--sample", "40"]
            + ["--estimators", "logme,hscore,gbc,knn", "--no-progress", "--no-cache"],
            capsys,
        )
        assert code == 0, err
        outputs.append([line for line in out.splitlines() if line.startswith("ranking by")])
    alpha, beta = twins
    assert outputs[0] == outputs[1]
    assert outputs[0] == [
        f"ranking by {name}: {alpha} = {beta}" for name in ("logme", "hscore", "gbc", "knn")
    ]


def test_a_sample_too_small_for_the_estimators_is_refused_before_models_load(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = write_reviews(tmp_path / "reviews.csv", rows=80)
    args = ["rank", "--models", "nowhere/a,nowhere/b", "--data", str(data), "--no-progress"]
    refused(
        [*args, "--sample", "2"],
        capsys,
        "a sample of 2 examples has 1 of class",
        "logme, hscore, gbc, transrate, intra-variance need 2; knn needs 4; nleep needs 6",
        "raise --sample (0 takes all",
    )
    refused([*args, "--sample", "8", "--estimators", "nleep,logme"], capsys, "(nleep needs 6")


def test_a_model_named_twice_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    refused(
        ["rank", "--models", "nowhere/a,nowhere/b,nowhere/a", "--no-progress"],
        capsys,
        "--models names nowhere/a more than once",
    )
