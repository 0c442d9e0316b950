"""The report's numbers on synthetic records with answers worked out by hand."""

from __future__ import annotations

import math

import pytest
from test_report_records import make_record, make_row, stored

from adaptlab.report import formatting as fmt
from adaptlab.report.aggregate import (
    Cell,
    chosen,
    group_cells,
    mean_curve,
    mean_std,
    ranked,
    robustness,
    settings,
)
from adaptlab.report.judging import judge
from adaptlab.report.recommend import sentence, verdict, welch_p
from adaptlab.report.records import read_runs
from adaptlab.study.store import StoredRun


def cells_of(records: list[StoredRun]) -> list[Cell]:
    runs = read_runs(records)
    return group_cells(runs, judge(runs))


def test_mean_and_sample_std_over_seeds() -> None:
    assert mean_std([0.8, 0.9, 1.0]) == pytest.approx((0.9, 0.1))
    assert mean_std([0.7]) == (0.7, 0.0)


def test_runs_group_by_setting_method_and_learning_rate() -> None:
    records = [
        make_record(method=m, learning_rate=lr, seed=s, test=t)
        for m, lr, s, t in [
            ("houlsby", 1e-4, 0, 0.84),
            ("full", 2e-5, 0, 0.80),
            ("full", 1e-4, 0, 0.70),
            ("full", 2e-5, 1, 0.82),
            ("houlsby", 1e-4, 1, 0.86),
            ("full", 1e-4, 1, 0.60),
        ]
    ]
    records.append(make_record(method="full", train_size=100, test=0.5))
    cells = cells_of(records)
    got = [(c.setting.train_size, c.method, c.learning_rate, c.scores) for c in cells]
    assert got == [
        (100, "full", 2e-5, (0.5,)),
        (1000, "houlsby", 1e-4, (0.84, 0.86)),
        (1000, "full", 2e-5, (0.80, 0.82)),
        (1000, "full", 1e-4, (0.70, 0.60)),
    ]
    assert cells[1].mean == pytest.approx(0.85)
    assert cells[1].std == pytest.approx(math.sqrt(2) * 0.01)


def test_settings_keep_study_order_of_data_and_sort_sizes() -> None:
    records = [
        make_record(data="rte", train_size=1000),
        make_record(data="sst2", train_size=5000),
        make_record(data="rte", train_size=100),
        make_record(data="sst2", train_size=None),
    ]
    got = [(s.data, s.train_size, s.full) for s in settings(read_runs(records))]
    assert got == [
        ("rte", 100, False),
        ("rte", 1000, False),
        ("sst2", 5000, False),
        ("sst2", 6920, True),
    ]


def test_learning_rate_is_chosen_on_dev_not_test() -> None:
    # 1e-4 has the better test mean but the worse dev mean: dev must decide.
    records = [make_record(learning_rate=2e-5, seed=s, test=0.80, dev=0.90) for s in (0, 1)] + [
        make_record(learning_rate=1e-4, seed=s, test=0.85, dev=0.88) for s in (0, 1)
    ]
    (cell,) = chosen(cells_of(records))
    assert cell.learning_rate == 2e-5


def test_learning_rate_falls_back_to_test_without_dev() -> None:
    rows = [make_row(learning_rate=lr, test=t) for lr, t in [(2e-5, 0.8), (1e-4, 0.85)]]
    for row in rows:
        row["dev"] = {}
    (cell,) = chosen(cells_of([stored(row) for row in rows]))
    assert cell.learning_rate == 1e-4


def test_ranking_puts_best_mean_first_and_keeps_order_on_ties() -> None:
    records = [
        make_record(method="a", test=0.7),
        make_record(method="b", test=0.9),
        make_record(method="c", test=0.7),
    ]
    assert [c.method for c in ranked(cells_of(records))] == ["b", "a", "c"]


def test_robustness_is_mean_over_rates_over_best_mean() -> None:
    records = [
        make_record(learning_rate=lr, seed=s, test=t)
        for lr, s, t in [(2e-5, 0, 0.78), (2e-5, 1, 0.82), (1e-4, 0, 0.6), (1e-4, 1, 0.6)]
    ]
    assert robustness(cells_of(records)) == pytest.approx((0.8 + 0.6) / 2 / 0.8)
    assert robustness(cells_of(records[:2])) is None  # one learning rate: no number
    zero = [make_record(learning_rate=lr, test=0.0, epochs=[(0.5, 0.0)]) for lr in (1e-5, 2e-5)]
    assert robustness(cells_of(zero)) is None  # a best mean of 0: no ratio


def test_welch_p_matches_the_textbook_value() -> None:
    # means 2 and 5, variances 1 and 1, n 3 and 3: t = -3 / sqrt(2/3), df = 4, p = 0.02131
    assert welch_p([1, 2, 3], [4, 5, 6]) == pytest.approx(0.021311, abs=1e-5)
    assert welch_p([1.0], [2.0, 3.0]) is None
    assert welch_p([0.5, 0.5], [0.5, 0.5]) == 1.0
    assert welch_p([0.5, 0.5], [0.6, 0.6]) == 0.0


def study(winner: list[float], runner_up: list[float], cheap: list[float]) -> list[dict]:
    """Three methods: houlsby (120k params), full (4.4M), bitfit (12.7k) with given scores."""
    scores = {"houlsby(hidden_size=64)": winner, "full": runner_up, "bitfit": cheap}
    return [
        make_record(method=m, seed=seed, test=t)
        for m, values in scores.items()
        for seed, t in enumerate(values)
    ]


def test_verdict_with_a_clear_winner() -> None:
    v = verdict(chosen(cells_of(study([0.90, 0.91, 0.92], [0.80, 0.81, 0.82], [0.5, 0.5, 0.6]))))
    assert (v.winner.method, v.runner_up and v.runner_up.method) == (
        "houlsby(hidden_size=64)",
        "full",
    )
    assert v.gap == pytest.approx(0.10)
    assert v.clear is True
    assert [c.method for c in v.within_noise] == ["houlsby(hidden_size=64)"]
    text = sentence(v, with_model=False)
    assert "houlsby(hidden_size=64) wins with accuracy 0.910 ± 0.010" in text
    assert "0.100 above the runner-up full" in text
    assert "larger than the spread over seeds (two-sided Welch's t-test p < 0.001)" in text


def test_verdict_within_noise_points_to_the_cheapest_method_within_it() -> None:
    v = verdict(chosen(cells_of(study([0.80, 0.90], [0.79, 0.89], [0.78, 0.88]))))
    assert v.winner.method == "houlsby(hidden_size=64)"
    assert v.clear is False
    assert v.cheapest_within_noise.method == "bitfit"
    text = sentence(v, with_model=False)
    assert "within the spread over seeds" in text
    assert "so bitfit, the cheapest method not clearly worse" in text


def test_verdict_with_one_seed_or_one_method_says_so() -> None:
    one_seed = verdict(chosen(cells_of(study([0.9], [0.8], [0.7]))))
    assert one_seed.p_value is None and one_seed.clear is None
    assert "single seed" in sentence(one_seed, with_model=False)
    alone = verdict(chosen(cells_of([make_record(method="lora", test=0.8)])))
    assert alone.runner_up is None
    assert "only lora was run" in sentence(alone, with_model=False)


def test_mean_curve_averages_seeds_step_by_step() -> None:
    runs = read_runs(
        [
            make_record(seed=0, epochs=[(0.6, 0.70), (0.4, 0.80)], steps_per_epoch=10),
            make_record(seed=1, epochs=[(0.8, 0.72), (0.6, 0.84)], steps_per_epoch=10),
            make_record(seed=2, epochs=[(1.0, 0.74)], steps_per_epoch=10),  # stopped early
        ]
    )
    curve = mean_curve(runs, "accuracy")
    assert curve is not None
    assert curve.steps == (10, 20)
    assert curve.loss == pytest.approx((0.8, 0.5))
    assert curve.metric == pytest.approx((0.72, 0.82))
    assert curve.metric_std == pytest.approx((0.02, math.sqrt(2) * 0.02))
    assert mean_curve([], "accuracy") is None


def test_trainable_share_and_formatting() -> None:
    (cell,) = cells_of([make_record(trainable=1_000, method="x")])
    assert cell.trainable_pct == pytest.approx(100 * 1_000 / 4_386_178)
    assert [fmt.rate(r) for r in (2e-5, 1e-4, 3.5e-4, None)] == [
        "2e-5",
        "1e-4",
        "3.5e-4",
        "default",
    ]
    assert [fmt.count(n) for n in (512, 36_866, 4_386_178)] == ["512", "36.9k", "4.39M"]
    assert fmt.p_value(0.0004) == "p < 0.001" and fmt.p_value(0.0312) == "p = 0.031"


def test_candidates_from_folders_show_their_last_part_and_names_stay_whole() -> None:
    assert fmt.candidate("runs/m/minilm-l6-first2") == "minilm-l6-first2"
    assert fmt.candidate("../runs/transfer-models/minilm-l6-reinit/") == "minilm-l6-reinit"
    assert fmt.candidate("/abs/path/model") == "model"
    assert fmt.candidate("minilm-l6@first2") == "minilm-l6@first2"
    assert fmt.candidate("sentence-transformers/all-MiniLM-L6-v2") == (
        "sentence-transformers/all-MiniLM-L6-v2"
    )


def test_failed_runs_are_those_predicting_one_class() -> None:
    healthy = [("negative", 50, 48, 40), ("positive", 50, 52, 42)]
    collapsed = [("negative", 50, 100, 50), ("positive", 50, 0, 0)]
    records = [
        make_record(learning_rate=1e-4, seed=s, test=t, test_classes=c)
        for s, t, c in [(0, 0.82, healthy), (1, 0.5, collapsed), (2, 0.5, collapsed)]
    ]
    assert [c.one_class for c in cells_of(records)] == [2]
    assert [c.one_class for c in cells_of(records[:1])] == [0]
    unknown = [*records, make_record(learning_rate=1e-4, seed=3, test=0.8)]
    assert [c.one_class for c in cells_of(unknown)] == [None]
