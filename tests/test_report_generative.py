"""The report on hand-made generative runs: perplexity is lower-is-better wherever the report
ranks (the learning rate chosen, the winner, the best seed, robustness), causal-lm is judged by
perplexity and sft by exact match or the study's `metric:`, a classification and an sft run of
one corpus sit side by side, and generated text, however hostile, is escaped."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from test_report_records import make_row, stored

from adaptlab.report import write_report
from adaptlab.report.aggregate import best_run, chosen, group_cells, ranked, robustness
from adaptlab.report.judging import judge
from adaptlab.report.recommend import sentence, verdict
from adaptlab.report.records import read_runs
from adaptlab.study.store import StoredRun

HOSTILE = '</td></tr></table><script>alert("gen")</script><img src=x onerror=alert(1)> & $x$'


def generative_record(
    *,
    method: str = "lora",
    seed: int = 0,
    learning_rate: float = 1e-4,
    task: str = "causal-lm",
    data: str = "docs",
    perplexities: Sequence[float] = (40.0, 30.0),
    test_perplexity: float = 30.0,
    exact_match: float = 0.5,
    generations: Sequence[tuple[str, str, str]] = (),
    dropped: dict[str, int] | None = None,
    study_metric: str | None = None,
    trainable: int | None = None,
) -> StoredRun:
    """A finished causal-lm (or sft) run: dev perplexity per epoch, its test scores and a
    sample of (prompt, generation, reference)."""
    row = make_row(
        method=method, seed=seed, learning_rate=learning_rate, data=data, trainable=trainable
    )
    sft = task != "causal-lm"
    metric = "exact_match" if sft else "perplexity"

    def scores(perplexity: float) -> dict[str, float]:
        found = {"perplexity": perplexity, "token_accuracy": 1.0 / perplexity}
        return {**found, "exact_match": exact_match} if sft else found

    row["data"] = {
        "name": data,
        "task": task,
        "labels": [],
        "sizes": {"train": 40, "dev": 5, "test": 5},
        "dropped": dropped or {"train": 0, "dev": 0, "test": 0},
    }
    row["spec"]["data_options"] = {"task": task}
    row["metric"] = metric
    row["epochs"] = [
        {
            "epoch": i + 1,
            "step": 5 * (i + 1),
            "train_loss": 3.0,
            "dev_loss": 3.0,
            "dev_metrics": scores(value),
            "seconds": 1.0,
        }
        for i, value in enumerate(perplexities)
    ]
    best = min(range(len(perplexities)), key=lambda i: perplexities[i])
    row["best_epoch"] = best + 1
    row["dev"] = scores(perplexities[best])
    row["test"] = scores(test_perplexity)
    if generations:
        row["generations"] = [
            {"prompt": p, "generation": g, "reference": r} for p, g, r in generations
        ]
    return stored(row, study_metric)


def verdict_of(records: list[StoredRun]) -> Any:
    runs = read_runs(records)
    cells = chosen(group_cells(runs, judge(runs)))
    return verdict(cells)


def test_the_lower_perplexity_wins_and_the_sentence_says_below() -> None:
    records = [
        generative_record(method="houlsby", seed=s, test_perplexity=t)
        for s, t in ((0, 30.0), (1, 31.0))
    ] + [
        generative_record(method="lora", seed=s, test_perplexity=t)
        for s, t in ((0, 20.0), (1, 21.0))
    ]
    found = verdict_of(records)
    assert [c.method for c in found.ranking] == ["lora", "houlsby"]
    assert found.winner.metric == "perplexity"
    assert found.gap == pytest.approx(10.0)
    text = sentence(found, with_model=False)
    assert "lora wins with perplexity 20.500" in text
    assert "10.000 below the runner-up houlsby" in text


def test_the_learning_rate_with_the_lower_dev_perplexity_is_chosen() -> None:
    # 1e-3 has the lower dev perplexity (15 against 25) and the higher test perplexity:
    # dev decides, and lower is better.
    records = [
        generative_record(
            learning_rate=1e-4, seed=s, perplexities=(30.0, 25.0), test_perplexity=22.0
        )
        for s in (0, 1)
    ] + [
        generative_record(
            learning_rate=1e-3, seed=s, perplexities=(20.0, 15.0), test_perplexity=24.0
        )
        for s in (0, 1)
    ]
    runs = read_runs(records)
    cells = group_cells(runs, judge(runs))
    (picked,) = chosen(cells)
    assert picked.learning_rate == 1e-3
    # robustness where lower is better: the best mean over the mean over rates (22 / 23)
    assert robustness(cells) == pytest.approx(22.0 / 23.0)
    assert [c.learning_rate for c in ranked(cells)] == [1e-4, 1e-3]


def test_the_best_seed_is_the_one_with_the_lower_dev_perplexity() -> None:
    runs = read_runs(
        [
            generative_record(seed=0, perplexities=(40.0, 33.0)),
            generative_record(seed=1, perplexities=(40.0, 12.0)),
            generative_record(seed=2, perplexities=(40.0, 50.0)),
        ]
    )
    assert best_run(runs, "perplexity").seed == 1


def test_a_study_metric_of_perplexity_judges_sft_runs_lower_first() -> None:
    records = [
        generative_record(
            method=m, task="sft", data="qa", test_perplexity=t, exact_match=e, study_metric=m_
        )
        for m, t, e, m_ in (("lora", 9.0, 0.1, "perplexity"), ("houlsby", 5.0, 0.0, "perplexity"))
    ]
    runs = read_runs(records)
    judged = judge(runs)["qa (generated)"]
    assert (judged.metric, judged.second) == ("perplexity", "exact_match")
    assert verdict_of(records).winner.method == "houlsby"
    by_default = [generative_record(method="lora", task="sft", data="qa", exact_match=0.4)]
    assert judge(read_runs(by_default))["qa (generated)"].metric == "exact_match"


def section(page: str, ident: str) -> str:
    match = re.search(rf'<section id="{ident}">(.*?)</section>', page, re.S)
    assert match, f"section {ident} missing"
    return match.group(1)


def test_a_classification_and_an_sft_run_of_one_corpus_side_by_side(tmp_path: Path) -> None:
    records = [
        stored(make_row(method="lora", data="rotten-tomatoes", test=0.8)),
        generative_record(
            method="lora",
            task="sft",
            data="rotten-tomatoes-instructions",
            exact_match=0.75,
            generations=[("Review: fine.\nIs this review fresh or rotten?", " fresh", " fresh")],
            dropped={"train": 2, "dev": 0, "test": 1},
        ),
    ]
    page = write_report(records, tmp_path / "r.html", title="t").read_text(encoding="utf-8")
    assert "accuracy on rotten-tomatoes (the task" in page
    assert "exact match on rotten-tomatoes-instructions (generated)" in page
    body = section(page, "generative")
    assert body.count("<h3>") == 1 and "rotten-tomatoes-instructions (generated)" in body
    assert 'alt="dev perplexity against epochs' in body
    assert "Is this review fresh or rotten?" in body and "2 train, 0 dev, 1 test" in body


def test_the_section_is_absent_without_generative_runs(tmp_path: Path) -> None:
    page = write_report([stored(make_row())], tmp_path / "r.html", title="t")
    assert 'id="generative"' not in page.read_text(encoding="utf-8")


def test_a_causal_lm_report_draws_the_perplexity_curves_and_marks_the_winner(
    tmp_path: Path,
) -> None:
    records = [
        generative_record(method=m, seed=s, perplexities=curve, test_perplexity=curve[-1])
        for m, curve in (("lora", (50.0, 20.0, 10.0)), ("houlsby", (60.0, 40.0, 30.0)))
        for s in (0, 1)
    ]
    page = write_report(records, tmp_path / "r.html", title="t").read_text(encoding="utf-8")
    assert "perplexity on docs (causal LM) (the task" in page
    assert re.search(r'<tr class="best">\s*<td>★\xa0lora</td>', section(page, "results"))
    body = section(page, "generative")
    assert body.count('alt="dev perplexity against epochs') == 1
    assert "<table>" not in body  # causal-lm runs generate nothing


def test_hostile_generated_text_is_escaped(tmp_path: Path) -> None:
    long_answer = "word " * 400
    record = generative_record(
        task="sft",
        data="qa",
        generations=[(HOSTILE, HOSTILE, "ok"), ("second prompt", long_answer, HOSTILE)],
    )
    page = write_report([record], tmp_path / "r.html", title="t").read_text(encoding="utf-8")
    assert "<script" not in page and "onerror=alert(1)>" not in page
    escaped = (
        "&lt;/td&gt;&lt;/tr&gt;&lt;/table&gt;&lt;script&gt;alert(&quot;gen&quot;)"
        "&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt; &amp; $x$"
    )
    body = section(page, "generative")
    assert body.count(escaped) == 3  # prompt, generation, reference
    assert body.count("<tr>") == 3  # the header and one row per prompt: no row was broken out
    assert long_answer[:500] + "…" in body and long_answer not in body
