"""Agreement of estimator scores with fine-tuning, and `adaptlab rank` end to end on a study."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from cli_cases import run_cli
from study_helpers import write_reviews
from tiny_models import save_tiny_bert

from adaptlab.select import agreement
from adaptlab.study import load_validations, run_study
from adaptlab.study.executors import LocalExecutor

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_agreement_is_plus_one_for_the_same_order_and_minus_one_for_the_reverse() -> None:
    same = agreement([1.0, 2.0, 3.0, 4.0], [0.5, 0.6, 0.7, 0.9])
    reverse = agreement([4.0, 3.0, 2.0, 1.0], [0.5, 0.6, 0.7, 0.9])
    assert (same.kendall_tau, same.candidates) == (1.0, 4)
    assert same.weighted_tau == pytest.approx(1.0)
    assert reverse.kendall_tau == -1.0 and reverse.weighted_tau == pytest.approx(-1.0)
    assert same.pearson is not None and same.pearson > 0.9


def test_weighted_tau_counts_the_top_of_the_ranking_more() -> None:
    truth = [5.0, 4.0, 3.0, 2.0, 1.0]
    top_swapped = agreement([4.0, 5.0, 3.0, 2.0, 1.0], truth)
    bottom_swapped = agreement([5.0, 4.0, 3.0, 1.0, 2.0], truth)
    assert top_swapped.kendall_tau == bottom_swapped.kendall_tau
    assert top_swapped.weighted_tau is not None and bottom_swapped.weighted_tau is not None
    assert top_swapped.weighted_tau < bottom_swapped.weighted_tau


def test_undefined_correlations_are_none_never_nan() -> None:
    assert agreement([1.0], [0.5]).kendall_tau is None
    constant = agreement([1.0, 1.0, 1.0], [0.1, 0.2, 0.3])
    assert (constant.kendall_tau, constant.weighted_tau, constant.pearson) == (None, None, None)
    two = agreement([1.0, 2.0], [0.1, 0.2])
    assert two.kendall_tau == 1.0 and two.pearson is None


def test_rank_validates_against_a_study_of_the_same_candidates(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], feature_cache: Path
) -> None:
    model = save_tiny_bert(str(tmp_path / "models" / "tiny"))
    data = str(write_reviews(tmp_path / "reviews.csv", rows=60))
    candidates = f"{model},{model}@first1,{model}@reinit"
    code, out, _ = run_cli(
        [
            "rank",
            "--models",
            f"{model}@first1,{model}@reinit",
            "--write-controls",
            str(tmp_path / "controls"),
        ],
        capsys,
    )
    assert code == 0 and "tiny-first1" in out
    spec = {
        "name": "transfer",
        "models": [
            model,
            str(tmp_path / "controls" / "tiny-first1"),
            str(tmp_path / "controls" / "tiny-reinit"),
        ],
        "data": [data],
        "methods": ["head"],
        "epochs": 1,
        "batch_size": 8,
    }
    (tmp_path / "transfer.yaml").write_text(yaml.safe_dump(spec))
    summary = run_study(tmp_path / "transfer.yaml", executor=LocalExecutor(progress=False))
    assert not summary.failed
    out_json = tmp_path / "rank.json"
    ranking = ["rank", "--data", data, "--models", candidates, "--sample", "0", "--no-progress"]
    validated = ["--layers", "--validate", str(summary.store), "--json", str(out_json)]
    code, out, err = run_cli([*ranking, "--estimators", "logme,knn", *validated], capsys)
    assert code == 0, err
    assert "agreement with fine-tuning" in out and "ranking by logme" in out
    result = json.loads(out_json.read_text())
    models = result["validation"]["models"]
    assert set(models["fine_tuned"]) == {"tiny", "tiny-first1", "tiny-reinit"}
    for name in ("logme", "knn"):
        measured = models["estimators"][name]
        assert measured["candidates"] == 3
        assert measured["kendall_tau"] is None or -1 <= measured["kendall_tau"] <= 1
    # the per-layer candidates tiny#L1 and tiny#L2 stand for the tiny-first1 and tiny runs
    layers = result["validation"]["layers"]
    assert set(layers["fine_tuned"]) == {"tiny", "tiny-first1", "tiny-reinit"}
    assert len(result["ranking"]["layer_rows"]) == 5  # tiny: 2 blocks, first1: 1, reinit: 2
    saved = {v["kind"]: v for v in load_validations(summary.store)}
    assert saved["models"]["estimators"] == models["estimators"]
    assert saved["layers"]["fine_tuned"] == layers["fine_tuned"]
    report = tmp_path / "report.html"
    code, out, err = run_cli(["study", "report", str(summary.store), "-o", str(report)], capsys)
    assert code == 0, err
    page = report.read_text(encoding="utf-8")
    assert '<section id="transferability">' in page
    assert "reviews · per-layer candidates" in page and "<td>tiny@reinit</td>" in page
    code, out, err = run_cli([*ranking, "--estimators", "knn", "--aggregate", "best"], capsys)
    assert code == 0, err
    assert "scores (best layer)" in out and "(L1)" in out and "3 from cache" in out


def test_rank_errors_are_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    code, _, err = run_cli(["rank", "--models", "minilm-l6", "--estimators", "leep"], capsys)
    assert code == 1 and "unknown estimator leep" in err and "Traceback" not in err
    code, _, err = run_cli(["rank", "--models", "minilm-l6@first0"], capsys)
    assert code == 1 and "bad candidate" in err
    code, _, err = run_cli(["rank", "--models", "minilm-l6", "--aggregate", "top"], capsys)
    assert code == 1 and "--aggregate is one of last, best, mean" in err
