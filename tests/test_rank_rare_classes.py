"""`adaptlab rank` on data with a class too rare for the estimators: the refusal says whether a
larger sample can help and which estimators can run, `--drop-rare-classes` leaves the class out
and says what it dropped, and a study store with diverged runs is validated without them.
Inputs unchanged byte for byte."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import pytest
from cli_cases import refused, run_cli, unchanged, write_reviews
from test_report_records import make_record
from tiny_models import save_tiny_bert

from adaptlab.study import ResultStore
from adaptlab.study.planner import plan_study
from adaptlab.study.spec import load_spec

NO_MODEL = "nowhere/a"
"""A model that cannot load: a refusal naming the data proves no model was loaded."""


def reviews_with_rare(folder: Path, rare: int) -> Path:
    """The learnable reviews plus `rare` examples of class 'lonely' (a single one is always a
    training example: the 80/10/10 split is stratified)."""
    folder.mkdir(parents=True, exist_ok=True)
    data = write_reviews(folder / "reviews.csv", rows=60)
    with data.open("a", newline="") as file:
        csv.writer(file).writerows([["a lonely film", "lonely"]] * rare)
    return data


def rank(model: str, data: Path, *extra: str) -> list[str]:
    return ["rank", "--models", model, "--data", str(data), "--sample", "0", "--no-progress",
            "--no-cache", *extra]  # fmt: skip


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return Path(save_tiny_bert(str(tmp_path_factory.mktemp("models") / "tiny")))


def test_a_class_with_one_example_says_no_estimator_can_run_and_how_to_go_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = reviews_with_rare(tmp_path / "in", 1)
    with unchanged(tmp_path / "in"):
        line = refused(
            rank(NO_MODEL, data),
            capsys,
            "has 1 of class 'lonely', too few for a score that says anything",
            "logme, hscore, gbc, transrate, intra-variance need 2; knn needs 4; nleep needs 6",
            "a larger --sample cannot help: all 50 training examples hold 1 of class 'lonely'",
            "no estimator can run on it as it is",
            "or pass --drop-rare-classes to leave out classes of fewer than 6 examples",
        )
    assert "raise --sample" not in line


def test_a_class_with_two_examples_names_the_estimators_that_can_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = reviews_with_rare(tmp_path / "in", 3)  # 2 of them in the training split
    with unchanged(tmp_path / "in"):
        refused(
            rank(NO_MODEL, data),
            capsys,
            "has 2 of class 'lonely'",
            "(knn needs 4; nleep needs 6 examples of every class)",
            "only logme, hscore, gbc, transrate, intra-variance can run on it "
            "(--estimators logme,hscore,gbc,transrate,intra-variance)",
        )


def test_drop_rare_classes_leaves_the_class_out_and_says_so(
    model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = reviews_with_rare(tmp_path / "in", 1)
    out = tmp_path / "out" / "rank.json"
    with unchanged(tmp_path / "in"), unchanged(model.parent):
        code, printed, err = run_cli(
            rank(str(model), data, "--estimators", "logme,knn", "--drop-rare-classes",
                 "--json", str(out)),
            capsys,
        )  # fmt: skip
    assert code == 0, err
    assert (
        "left out 1 example of 1 class with fewer than 4 examples ('lonely' 1); "
        "49 examples scored" in printed
    )
    saved = json.loads(out.read_text())
    assert saved["ranking"]["examples"] == 49
    assert saved["ranking"]["dropped"] == {"below": 4, "classes": [["lonely", 1]]}


def test_drop_rare_classes_on_data_without_classes_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "in" / "scores.csv"
    data.parent.mkdir()
    data.write_text("text,label\n" + "".join(f"film {i},{i / 10}\n" for i in range(40)))
    with unchanged(tmp_path / "in"):
        refused(
            [*rank(NO_MODEL, data, "--drop-rare-classes"), "--task", "regression"],
            capsys,
            "--drop-rare-classes leaves out classes, and scores is regression data",
        )


def test_validation_leaves_out_diverged_runs(
    model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = reviews_with_rare(tmp_path / "in", 0)
    store = tmp_path / "store" / "s.db"
    store.parent.mkdir()
    spec = store.parent / "s.yaml"
    spec.write_text("name: s\nmodels: [minilm-l6]\ndata: [rotten-tomatoes]\nmethods: [lora]\n"
                    "seeds: [0, 1]\n")  # fmt: skip
    with ResultStore(store) as results:
        planned = plan_study(load_spec(spec), store.parent)
        results.set_plan("s", planned)
        for run, score in zip(planned, (math.nan, 0.8), strict=True):
            record = make_record(study="s", model=str(model), data="reviews", test=score)
            results.start(run)
            results.finish(run.run_id, record.result)
    with unchanged(tmp_path / "in"):
        code, printed, err = run_cli(
            rank(str(model), data, "--estimators", "logme", "--validate", str(store)), capsys
        )
    assert code == 0, err
    assert f"left out 1 run of {store} whose test score is NaN or infinite" in printed
    assert "saved in" in printed
