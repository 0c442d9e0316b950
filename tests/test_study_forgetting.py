"""A study's `forgetting:` and `analysis: [spectrum]` on decoder runs: every run scored on its
probes and its own test split (the base scored once and shared), the spectrum of its updates
kept, the report's learning-and-forgetting section with its frontier and table; refusals as the
spec loads."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from generative_helpers import tiny_decoder
from study_helpers import assert_spec_refused, save_spec

from adaptlab.report import write_report
from adaptlab.report.plots_forgetting import Point, frontier_of
from adaptlab.study.executors import LocalExecutor
from adaptlab.study.runner import run_study
from adaptlab.study.store import load_records

WORDS = ["the", "cat", "sat", "on", "a", "mat", "and", "dog", "ran", "to", "park", "in", "trees"]


def paragraphs(count: int, shift: int) -> str:
    rows = [" ".join(WORDS[(i * 7 + j * (shift + 3)) % len(WORDS)] for j in range(24))
            for i in range(count)]  # fmt: skip
    return "\n\n".join(rows) + "\n"


def write_study(folder: Path, model: str, **keys: Any) -> Path:
    (folder / "docs.txt").write_text(paragraphs(60, 0).replace("\n\n", "\n"))
    (folder / "held-out.txt").write_text(paragraphs(12, 2))
    spec = {
        "name": "lf",
        "models": [model],
        "data": [{"docs.txt": {"task": "causal-lm"}}],
        "methods": [
            {"method": "full", "learning_rates": [1e-3]},
            {"method": "lora", "learning_rates": [3e-2]},
            {"method": "houlsby", "learning_rates": [3e-2]},
        ],
        "epochs": 1,
        "batch_size": 8,
        "max_length": 32,
        "device": "cpu",
        "analysis": ["spectrum"],
        "forgetting": {"probes": ["text:held-out.txt"], "limit": 5, "window": 16},
        **keys,
    }
    return save_spec(folder / "lf.yaml", spec)


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("study")
    spec = write_study(folder, tiny_decoder(tmp_path_factory.mktemp("decoder")))
    run_study(spec, executor=LocalExecutor(progress=False))
    return folder


def test_each_run_records_its_forgetting_learning_and_spectrum(study: Path) -> None:
    records = {r.result.spec.methods[0].name: r.result for r in load_records(study / "lf.db")}
    assert set(records) == {"full", "lora", "houlsby"}
    bases = set()
    for method, result in records.items():
        analysis = result.analysis
        assert analysis is not None and set(analysis) == {"spectrum", "forgetting"}
        (probe,) = analysis["forgetting"]["probes"]
        assert probe["probe"].endswith("held-out.txt") and probe["items"] == 5
        bases.add(probe["base"])
        target = analysis["forgetting"]["target"]
        assert target["probe"] == "target" and math.isfinite(target["forgetting"])
        spectrum = analysis["spectrum"]
        if method == "houlsby":
            assert spectrum["layers"] == [] and spectrum["without_matrix"] == ["houlsby"]
        else:
            assert len(spectrum["layers"]) == 2  # the tiny Llama's two blocks
    assert len(bases) == 1  # one base, scored once and shared by every run
    lora = records["lora"].analysis
    assert lora is not None
    ranks = [kind["mean_effective_rank"] for layer in lora["spectrum"]["layers"]
             for name, kind in layer.items() if name != "layer"]  # fmt: skip
    assert all(1 <= rank <= 8 for rank in ranks)  # never above LoRA's rank


def test_the_report_shows_learning_against_forgetting(study: Path, tmp_path: Path) -> None:
    records = load_records(study / "lf.db")
    page = write_report(records, tmp_path / "r.html", title="t").read_text(encoding="utf-8")
    assert 'id="forgetting"' in page and "Learning and forgetting" in page
    assert "learnt (nats/token)" in page and "ΔW rank (90%)" in page
    assert "no ΔW" in page  # houlsby inserts modules
    assert page.count("data:image/svg+xml") >= 2  # the frontier and the ranks per block


def test_the_frontier_keeps_the_points_no_other_beats() -> None:
    points = [Point(n, n, x, 0, y, 0) for n, x, y in
              (("a", 1.0, 0.1), ("b", 2.0, 0.5), ("c", 1.5, 0.6), ("d", 0.5, 0.0))]  # fmt: skip
    assert [p.label for p in frontier_of(points)] == ["d", "a", "b"]


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        ({"data": [{"docs.txt": {"task": "single_label"}}]}, "forgetting: scores causal LMs"),
        ({"forgetting": {"probes": ["text"]}}, "is not kind:value"),
        ({"forgetting": {"probes": ["text:a.txt", "text:a.txt"]}}, "listed twice"),
    ],
    ids=["classifier", "no-kind", "twice"],
)
def test_bad_forgetting_keys_are_refused_as_the_spec_loads(
    tmp_path: Path, keys: dict[str, Any], message: str
) -> None:
    assert_spec_refused(write_study(tmp_path, "smollm2-135m", **keys), message)
