"""The metric that judges drives the report: learning-rate choice, "what to use", the tables,
the line under the title; and the per-class section with its imbalance note."""

from __future__ import annotations

import html
import re
from dataclasses import replace
from pathlib import Path

import pytest
from test_report_records import load_fixture_runs, make_record

from adaptlab.errors import ConfigError
from adaptlab.report import render_report
from adaptlab.report.records import read_runs
from adaptlab.report.view import StudyView, study_view
from adaptlab.study.store import StoredRun

REUTERS = Path(__file__).parent / "fixtures" / "reuters-imbalance.json"
SKEWED = {"earn": 500, "acq": 300, "grain": 8}
BALANCED = {"earn": 300, "acq": 280, "grain": 250}
# (accuracy, macro-F1) on test; dev is each + 0.01. Accuracy favours the probe at 1e-4 and the
# adapter at 1e-3; macro-F1 the probe at 1e-3 and the adapter at 1e-4, and the adapter overall.
SCORES = {
    ("probe", 1e-4): (0.80, 0.30),
    ("probe", 1e-3): (0.78, 0.50),
    ("adapter", 1e-4): (0.75, 0.60),
    ("adapter", 1e-3): (0.76, 0.55),
}
CLASSES = [("earn", 1000, 1300, 950), ("acq", 600, 610, 500), ("grain", 10, 0, 0)]


def study(
    counts: dict[str, int] | None = SKEWED, study_metric: str | None = None
) -> list[StoredRun]:
    records = []
    for (method, rate), (accuracy, f1) in SCORES.items():
        for seed, noise in ((0, -0.004), (1, 0.0), (2, 0.004)):
            records.append(
                make_record(
                    study_metric,
                    method=method,
                    learning_rate=rate,
                    seed=seed,
                    data="r8",
                    test=accuracy + noise,
                    dev=accuracy + 0.01,
                    macro_f1=f1 + noise,
                    dev_macro_f1=f1 + 0.01,
                    train_counts=counts,
                    test_classes=CLASSES if counts is not None else None,
                )
            )
    return records


def view_of(records: list[StoredRun], metric: str | None = None) -> StudyView:
    return study_view(read_runs(records), metric=metric)


def chosen_rates(view: StudyView) -> dict[str, float | None]:
    return {cell.method: cell.learning_rate for cell in view.chosen}


def test_skewed_data_chooses_rates_and_the_winner_by_macro_f1() -> None:
    view = view_of(study())
    (setting,) = view.settings
    assert view.judged["r8"].metric == "macro_f1"
    assert chosen_rates(view) == {"probe": 1e-3, "adapter": 1e-4}
    verdict = view.verdict(setting)
    assert verdict.winner.method == "adapter"
    assert verdict.winner.mean == pytest.approx(0.60)
    assert verdict.winner.second == "accuracy"
    assert verdict.winner.second_mean == pytest.approx(0.75)


@pytest.mark.parametrize(
    "records",
    [
        pytest.param(study(study_metric="accuracy"), id="metric: accuracy"),
        pytest.param(study(counts=None), id="results without class counts"),
        pytest.param(study(counts=BALANCED), id="balanced classes"),
    ],
)
def test_accuracy_gives_the_old_choice(records: list[StoredRun]) -> None:
    view = view_of(records)
    assert view.judged["r8"].metric == "accuracy"
    assert chosen_rates(view) == {"probe": 1e-4, "adapter": 1e-3}
    assert view.verdict(view.settings[0]).winner.method == "probe"


def test_the_page_says_which_metric_judges_and_why() -> None:
    page = html.unescape(render_report(study(), title="r8"))
    line = re.search(r'<p class="judged">(.*?)</p>', page)
    assert line is not None and page.index('class="judged"') < page.index('class="lead"')
    assert line.group(1) == (
        "Methods are judged by macro-F1 on r8 (the largest class of the training sample (earn, "
        "500 examples) is 62.5x its smallest (grain, 8), and accuracy would reward ignoring the "
        "small classes)."
    )
    assert "adapter wins with macro-F1 0.600 ± 0.004" in page
    assert "<th>test macro-F1</th>\n<th>test accuracy</th>\n<th>dev macro-F1</th>" in page
    by_accuracy = html.unescape(render_report(study(), title="r8", metric="accuracy"))
    assert "judged by accuracy on r8 (asked for by --metric)" in by_accuracy
    assert "probe wins with accuracy" in by_accuracy


def test_per_class_section_marks_classes_never_predicted() -> None:
    page = html.unescape(render_report(study(), title="r8"))
    section = page[page.index('<section id="per-class">') :]
    section = section[: section.index("</section>")]
    assert "<th>probe P</th>\n<th>probe R</th>\n<th>probe F1</th>" in section
    rows = re.findall(r'<tr( class="never")?><td>(.*?)</td>\n<td>([\d,]+)</td>', section)
    assert [(mark, name, support) for mark, name, support in rows] == [
        ("", "earn", "1,000"),
        ("", "acq", "600"),
        (' class="never"', "grain\u00a0∅", "10"),
    ]
    assert "1 of 3 classes is never predicted by any method's best run: grain." in section
    assert (
        "Training sample (seed 0, the same for every seed): 808 examples in 3 classes; largest "
        "earn 500 (61.9%), smallest grain 8 (1.0%), ratio 62.5x; 0 classes with fewer than 5 "
        "training examples; 0 test classes never seen in training." in section
    )


def test_rare_and_unseen_classes_are_counted() -> None:
    counts = {"earn": 500, "acq": 3, "grain": 0}
    page = html.unescape(render_report(study(counts=counts), title="r8"))
    assert "ratio infinite" in page
    assert "2 classes with fewer than 5 training examples (acq, grain)" in page
    assert "1 test class never seen in training (grain)" in page


def test_old_results_have_no_per_class_table_but_a_note() -> None:
    page = render_report(study(counts=None), title="r8")
    assert "r8 · 1000 examples: the runs recorded no per-class test counts." in page


def test_studies_asking_for_different_metrics_are_one_line() -> None:
    records = study(study_metric="accuracy")[:2] + study(study_metric="mcc")[2:]
    with pytest.raises(ConfigError, match=r"ask for different metrics \(accuracy, mcc\)"):
        view_of(records)
    assert view_of(records, metric="macro_f1").judged["r8"].metric == "macro_f1"


def test_the_real_reuters_study_is_judged_by_macro_f1_unless_asked_for_accuracy() -> None:
    records = load_fixture_runs(REUTERS)  # examples/reuters-imbalance.yaml, as it ran
    view = view_of(records)
    judged = view.judged["reuters-r8"]
    assert judged.metric == "macro_f1" and "(grain, 4)" in judged.choice.reason
    table = view.class_table(view.settings[0])
    assert table is not None and [row.label for row in table.rows][:2] == ["earn", "acq"]
    imbalance = view.imbalance(view.settings[0])
    assert imbalance is not None and imbalance.rare == ("grain",)
    by_spec = view_of([replace(r, study_metric="accuracy") for r in records])
    assert by_spec.judged["reuters-r8"].metric == "accuracy"
    assert {c.metric for c in by_spec.chosen} == {"accuracy"}
