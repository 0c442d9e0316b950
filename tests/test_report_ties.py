"""Methods whose mean test scores tie in the judging metric (equal up to float noise) are
reported as a tie: the verdict names them and the one training the fewest parameters, no
method wins alone, and the results table stars every tied method. Float noise never decides
a tie, nor the learning rate chosen on dev. A report of an sft study has no per-class section.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

from test_report_generative import generative_record, section
from test_report_records import make_record

from adaptlab.report import write_report
from adaptlab.report.aggregate import chosen, group_cells
from adaptlab.report.judging import judge
from adaptlab.report.recommend import sentence, verdict
from adaptlab.report.records import read_runs
from adaptlab.study.store import StoredRun

EXACT_MATCH = 13 / 30  # 13 of 30 test questions right
ABOVE = math.nextafter(EXACT_MATCH, 1.0)
"""The same score one float step higher, as another order of summing may give it."""
LORA, IA3 = 294_912, 36_864  # LoRA trains 8x the parameters of (IA)3


def sft(method: str, trainable: int, exact_match: float) -> StoredRun:
    return generative_record(
        method=method, task="sft", data="capitals", exact_match=exact_match, trainable=trainable
    )


def test_two_methods_tied_on_exact_match_tie_and_the_cheaper_is_named(tmp_path: Path) -> None:
    records = [sft("lora", LORA, EXACT_MATCH), sft("ia3", IA3, ABOVE)]
    page = write_report(records, tmp_path / "r.html", title="t").read_text(encoding="utf-8")
    verdicts = section(page, "what-to-use")
    assert "lora and ia3 tie at exact match 0.433" in verdicts
    assert "; ia3 trains 8x fewer parameters." in verdicts
    assert "wins" not in verdicts and "above" not in verdicts
    starred = re.findall(r'<tr class="best">\s*<td>★\xa0(\w+)</td>', section(page, "results"))
    assert starred == ["lora", "ia3"]
    assert 'id="per-class"' not in page and "has no classes" not in page


def verdict_of(records: list[StoredRun]) -> str:
    runs = read_runs(records)
    return sentence(verdict(chosen(group_cells(runs, judge(runs)))), with_model=False)


def test_a_tie_of_three_names_the_cheapest_against_the_next_and_the_runner_up() -> None:
    scores = {
        "houlsby(hidden_size=64)": (0.84, 0.86),
        "lora(r=8)": (0.86, 0.84),
        "bitfit": (0.85, 0.85),
        "full": (0.74, 0.76),
    }
    records = [
        make_record(method=method, seed=seed, test=score)
        for method, pair in scores.items()
        for seed, score in enumerate(pair)
    ]
    text = verdict_of(records)
    assert "houlsby(hidden_size=64), lora(r=8) and bitfit tie at accuracy 0.850 (" in text
    assert "bitfit trains 2.91x fewer parameters than the next, lora(r=8);" in text
    assert "all are 0.100 above the runner-up full" in text
    assert "the gap is larger than the spread over seeds" in text
    assert "wins" not in text


def test_methods_tied_that_train_as_many_parameters_say_so() -> None:
    records = [make_record(method=method, test=0.8, trainable=50_000) for method in ("lora", "ia3")]
    text = verdict_of(records)
    assert "lora and ia3 tie at accuracy 0.800" in text
    assert "each trains 50k parameters." in text


def test_a_dev_tie_between_learning_rates_goes_to_the_lowest_rate() -> None:
    records = [
        make_record(method="lora", learning_rate=rate, dev=dev, test=test)
        for rate, dev, test in ((1e-4, EXACT_MATCH, 0.80), (1e-3, ABOVE, 0.70))
    ]
    runs = read_runs(records)
    (picked,) = chosen(group_cells(runs, judge(runs)))
    assert picked.learning_rate == 1e-4
