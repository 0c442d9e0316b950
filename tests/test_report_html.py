"""The HTML file: written atomically, self-contained, with its sections, images and escaping."""

from __future__ import annotations

import base64
import re
from pathlib import Path

import pytest
from test_report_records import make_record, make_study

from adaptlab.errors import AdaptlabError
from adaptlab.report import write_report

HOSTILE = '<script>alert("x")</script> & $\\frac{1}{0}$'
IMG = re.compile(r'<img src="data:image/svg\+xml;base64,([A-Za-z0-9+/=]+)" alt="[^"]*">')


@pytest.fixture(scope="module")
def full_report(tmp_path_factory: pytest.TempPathFactory) -> str:
    """1 data set x 2 sizes x 3 methods x 2 learning rates x 2 seeds: every section."""
    out = tmp_path_factory.mktemp("full") / "nested" / "report.html"
    assert write_report(make_study(), out, title="Study <one>") == out
    return out.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def small_report(tmp_path_factory: pytest.TempPathFactory) -> str:
    """One size, one learning rate, a hostile method label."""
    records = make_study(methods=("full", HOSTILE), sizes=(1000,), rates=(1e-4,))
    out = tmp_path_factory.mktemp("small") / "report.html"
    write_report(records, out, title="small")
    return out.read_text(encoding="utf-8")


def section(page: str, ident: str) -> str:
    match = re.search(rf'<section id="{ident}">(.*?)</section>', page, re.S)
    assert match, f"section {ident} missing"
    return match.group(1)


def test_sections_and_image_count(full_report: str) -> None:
    for ident in (
        "what-to-use",
        "results",
        "efficiency",
        "training-size",
        "learning-rate",
        "overfitting",
    ):
        section(full_report, ident)
    # per setting (2): efficiency, learning rates, dev curves; per data set (1): training size
    assert len(IMG.findall(full_report)) == 7
    assert len(IMG.findall(section(full_report, "learning-rate"))) == 2
    assert len(IMG.findall(section(full_report, "training-size"))) == 1
    assert 'class="note"' not in section(full_report, "learning-rate")


def test_images_are_svg(full_report: str) -> None:
    for payload in IMG.findall(full_report):
        svg = base64.b64decode(payload)
        assert b"<svg" in svg[:2000] and svg.rstrip().endswith(b"</svg>")


def test_page_is_self_contained(full_report: str, small_report: str) -> None:
    for page in (full_report, small_report):
        assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:)?//""", page, re.I)
        assert not re.search(r"<script|<link|@import|url\(", page, re.I)
        assert "http://" not in page and "https://" not in page


def test_results_mark_the_winner(full_report: str) -> None:
    # make_study: houlsby beats full and bitfit at every size, at its dev-chosen rate
    table = section(full_report, "results")
    best = re.findall(r'<tr class="best">(.*?)</tr>', table, re.S)
    assert len(best) == 2
    for row in best:
        assert "★\u00a0houlsby(hidden_size=64)" in row and " ●</td>" in row and "2.74%" in row
    assert "houlsby(hidden_size=64) wins with accuracy" in section(full_report, "what-to-use")


def test_footer_names_study_runs_and_versions(full_report: str) -> None:
    footer = re.search(r"<footer>(.*)</footer>", full_report, re.S)
    assert footer
    text = footer.group(1)
    for fact in ("demo-study", "<dd>24 (", "bert-small", "torch 2.13.0", "lab-box"):
        assert fact in text
    assert "<title>Study &lt;one&gt;</title>" in full_report


def test_hostile_label_is_escaped(small_report: str) -> None:
    assert "<script>" not in small_report
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; $\\frac{1}{0}$" in small_report


def test_absent_sections_become_notes(small_report: str) -> None:
    for ident, words in (
        ("training-size", "one training size"),
        ("learning-rate", "one learning rate"),
    ):
        body = section(small_report, ident)
        assert not IMG.search(body)
        assert words in body and body.count('class="note"') == 1
    assert len(IMG.findall(small_report)) == 2  # efficiency and dev curves of the one setting


def test_rewrite_is_atomic_and_leaves_no_temp_file(tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    out.write_text("old")
    write_report([make_record()], out, title="t")
    assert out.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert [p.name for p in tmp_path.iterdir()] == ["report.html"]


def test_empty_records_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(AdaptlabError, match="no result records"):
        write_report([], tmp_path / "r.html", title="t")
    assert not (tmp_path / "r.html").exists()


VALIDATION = {
    "data": "rotten-tomatoes",
    "kind": "models",
    "candidates": {"minilm-l6": "minilm-l6", "minilm-l6-reinit": "minilm-l6@reinit"},
    "fine_tuned": {"minilm-l6-reinit": 0.55, "minilm-l6": 0.78},
    "scores": {
        "minilm-l6": {"logme": -0.6, "hscore": 0.55},
        "minilm-l6-reinit": {"logme": -0.7, "hscore": 0.41},
    },
    "estimators": {
        "logme": {"kendall_tau": 1.0, "weighted_tau": 1.0, "pearson": None, "candidates": 2},
        "hscore": {"kendall_tau": None, "weighted_tau": None, "pearson": None, "candidates": 2},
    },
}


def test_transferability_validation_shows_only_when_saved(
    tmp_path: Path, small_report: str
) -> None:
    assert 'id="transferability"' not in small_report
    out = write_report([make_record()], tmp_path / "r.html", title="t", validations=[VALIDATION])
    body = section(out.read_text(encoding="utf-8"), "transferability").replace("\n", "")
    assert "rotten-tomatoes · candidates" in body
    assert '<tr class="best"><td>★\u00a0logme</td><td>+1.000</td><td>+1.000</td><td>–</td>' in body
    assert "<td>hscore</td><td>–</td><td>–</td><td>–</td><td>2</td>" in body
    # candidates sorted by their fine-tuned score, with each estimator's score
    assert body.index("<td>minilm-l6</td><td>0.780</td>") < body.index("minilm-l6@reinit")
    assert "<td>minilm-l6@reinit</td><td>0.550</td><td>-0.7</td><td>0.41</td>" in body


def test_a_malformed_validation_is_a_clear_error(tmp_path: Path) -> None:
    broken = {**VALIDATION, "scores": {}}
    with pytest.raises(AdaptlabError, match="transferability validation is malformed"):
        write_report([make_record()], tmp_path / "r.html", title="t", validations=[broken])


def test_learning_rate_table_counts_failed_runs(tmp_path: Path) -> None:
    healthy = [("negative", 50, 48, 40), ("positive", 50, 52, 42)]
    collapsed = [("negative", 50, 0, 0), ("positive", 50, 100, 50)]
    records = [
        make_record(method=method, learning_rate=lr, seed=seed, test=0.5, test_classes=classes)
        for method, classes in (("full", collapsed), ("houlsby(hidden_size=64)", healthy))
        for lr in (2e-5, 1e-4)
        for seed in (0, 1)
    ]
    records[0] = make_record(method="full", learning_rate=2e-5, test=0.82, test_classes=healthy)
    out = write_report(records, tmp_path / "report.html", title="failed runs")
    rates = section(out.read_text(encoding="utf-8"), "learning-rate")
    assert "failed runs" in rates
    assert "<td>3 of 4</td>" in rates and "<td>0 of 4</td>" in rates
