"""A study that asks for analysis: each run's record holds it, the report draws it."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from study_helpers import write_reviews, write_spec
from tiny_models import save_tiny_bert

from adaptlab.errors import ConfigError
from adaptlab.report import render_report
from adaptlab.study.executors import LocalExecutor
from adaptlab.study.planner import plan_study
from adaptlab.study.runner import run_study
from adaptlab.study.spec import load_spec
from adaptlab.study.store import load_records

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished study (full, houlsby; one seed) with rsa, cka and landscape analyses."""
    folder = tmp_path_factory.mktemp("study")
    model = save_tiny_bert(str(folder / "tiny-bert"))
    data = str(write_reviews(folder / "reviews.csv", rows=80))
    spec = write_spec(
        folder,
        model,
        data,
        methods=["full", "houlsby"],
        seeds=[0],
        train_sizes=[30],
        analysis=["rsa", "cka", "landscape"],
        analysis_tokens=50,
    )
    run_study(spec, executor=LocalExecutor(progress=False))
    return folder / "tiny.db"


def test_each_record_holds_its_analyses(study: Path) -> None:
    records = load_records(study)
    assert [r.method_label for r in records] == ["full", "houlsby"]
    for record in records:
        analysis = record.result.analysis
        assert analysis is not None
        assert set(analysis) == {"rsa", "cka", "landscape"}
        for measure in ("rsa", "cka"):
            layers = analysis[measure]["layers"]
            assert [row["layer"] for row in layers] == [0, 1, 2]  # embeddings + 2 blocks
            assert analysis[measure]["tokens"] == 50
            assert all(-1.0 <= row["score"] <= 1.0 for row in layers)
        curve = analysis["landscape"]
        assert len(curve["alphas"]) == 22 and 0.0 in curve["alphas"] and 1.0 in curve["alphas"]
        assert curve["losses"][curve["alphas"].index(1.0)] == pytest.approx(
            record.result.best.dev_loss, abs=1e-5
        )
    houlsby = (records[1].result.analysis or {})["rsa"]["layers"]
    assert houlsby[0]["score"] == pytest.approx(1.0, abs=1e-6)  # adapters leave embeddings as is


def test_the_report_shows_per_layer_and_landscape_curves(study: Path) -> None:
    records = load_records(study)
    page = render_report(records, title="tiny")
    assert 'id="analysis"' in page
    assert page.count("per-layer rsa against the base model") == 1
    assert page.count("per-layer cka against the base model") == 1
    assert page.count("dev loss along the training direction") == 1
    plain = render_report(
        [replace(r, result=replace(r.result, analysis=None)) for r in records], title="t"
    )
    assert 'id="analysis"' not in plain


def test_spec_analysis_values_are_checked(tmp_path: Path) -> None:
    spec = write_spec(tmp_path, "minilm-l6", "rotten-tomatoes", analysis=["rsa", "flatness"])
    with pytest.raises(ConfigError, match=r"analysis\[1\]"):
        load_spec(spec)
    spec = write_spec(tmp_path, "minilm-l6", "rotten-tomatoes", analysis=["rsa"])
    runs = plan_study(load_spec(spec), tmp_path)
    assert {run.analysis.names for run in runs} == {("rsa",)}
    plain = write_spec(tmp_path, "minilm-l6", "rotten-tomatoes")
    assert [r.run_id for r in plan_study(load_spec(plain), tmp_path)] == [r.run_id for r in runs]
