"""Synthetic stored runs for the report tests, and the tests of reading them.

`make_row` builds one store row (the result's JSON form plus run_id, study and method label)
with plausible numbers, `make_record` the typed `StoredRun` read from it; `make_study` a grid
of them (methods x seeds x training sizes x learning rates). The other report tests import
these from here.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from adaptlab.errors import AdaptlabError, ConfigError
from adaptlab.methods.registry import list_methods
from adaptlab.records.result import RunResult
from adaptlab.report.judging import judge
from adaptlab.report.records import read_runs
from adaptlab.study.store import StoredRun

TOTAL = 4_386_178  # a small BERT with a 2-way head
TRAINABLE = {
    "full": TOTAL,
    "houlsby(hidden_size=64)": 120_194,
    "lora(r=8)": 36_866,
    "bitfit": 12_674,
}
BASE = {"full": 0.80, "houlsby(hidden_size=64)": 0.83, "lora(r=8)": 0.82, "bitfit": 0.76}


def make_row(
    *,
    method: str = "full",
    seed: int = 0,
    learning_rate: float | None = 2e-5,
    train_size: int | None = 1000,
    data: str = "sst2",
    model: str = "bert-small",
    test: float = 0.8,
    dev: float | None = None,
    metric: str = "accuracy",
    trainable: int | None = None,
    study: str = "demo-study",
    epochs: Sequence[tuple[float, float]] | None = None,
    steps_per_epoch: int = 63,
    macro_f1: float | None = None,
    dev_macro_f1: float | None = None,
    train_counts: dict[str, int] | None = None,
    test_classes: Sequence[tuple[str, int, int, int]] | None = None,
) -> dict[str, Any]:
    """One finished run's store row; `epochs` gives (dev_loss, dev_metric) per epoch; macro-F1
    is 0.01 below accuracy unless given; `test_classes` gives (label, support, predicted,
    correct) per class."""
    curve = epochs if epochs is not None else [(0.60, test - 0.04), (0.50, test), (0.55, test)]
    dev_score = dev if dev is not None else test + 0.01
    test_f1 = macro_f1 if macro_f1 is not None else _f1_beside(test)
    dev_f1 = dev_macro_f1 if dev_macro_f1 is not None else _f1_beside(dev_score)
    count = trainable if trainable is not None else TRAINABLE.get(method, 50_000)
    return {
        "run_id": f"{study}/{data}/{train_size}/{method}/{learning_rate}/{seed}",
        "study": study,
        "method_label": method,
        "spec": {
            "model": model,
            "data": data,
            "methods": [{"name": _method_name(method), "config": {}}],
            "train_size": train_size,
            "train": {
                "epochs": len(curve),
                "batch_size": 16,
                "learning_rate": learning_rate,
                "seed": seed,
                "warmup_ratio": 0.1,
            },
            "data_options": {},
            "device": "cpu",
        },
        "data": {
            "name": data,
            "task": "single_label",
            "labels": list(train_counts or ["negative", "positive"]),
            "sizes": {"train": train_size or 6920, "dev": 872, "test": 1821},
            **({"train_counts": train_counts} if train_counts is not None else {}),
        },
        "metric": metric,
        "epochs": [
            {
                "epoch": i + 1,
                "step": (i + 1) * steps_per_epoch,
                "train_loss": 0.7 / (i + 1),
                "dev_loss": loss,
                "dev_metrics": {metric: score, "macro_f1": _f1_beside(score)},
                "seconds": 10.0 * (i + 1),
            }
            for i, (loss, score) in enumerate(curve)
        ],
        "best_epoch": min(2, len(curve)),
        "dev": {metric: dev_score, "macro_f1": dev_f1},
        "test": {metric: test, "macro_f1": test_f1},
        **({"test_classes": _classes(test_classes)} if test_classes is not None else {}),
        "test_loss": 0.45,
        "trainable_parameters": count,
        "total_parameters": TOTAL,
        "parameter_groups": {"adapter": count},
        "adapter_bytes": 4 * count,
        "wall_seconds": 95.0,
        "peak_memory_bytes": None,
        "versions": {
            "adaptlab": "0.1.0",
            "torch": "2.13.0",
            "transformers": "5.23.0",
            "python": "3.11.9",
        },
        "host": "lab-box",
    }


def _f1_beside(score: float) -> float:
    """The macro-F1 a row holds beside `score`: 0.01 below it and at least 0 (a diverged
    run's NaN or infinity as it is)."""
    return max(score - 0.01, 0.0) if math.isfinite(score) else score


def _classes(rows: Sequence[tuple[str, int, int, int]]) -> list[dict[str, Any]]:
    keys = ("label", "support", "predicted", "correct")
    return [dict(zip(keys, row, strict=True)) for row in rows]


def _method_name(label: str) -> str:
    """The registered method a label starts with (`houlsby(hidden_size=64)`), else houlsby."""
    name = label.split("(")[0]
    return name if name in {m.name for m in list_methods()} else "houlsby"


def stored(row: dict[str, Any], study_metric: str | None = None) -> StoredRun:
    """A store row as `ResultStore.records()` reads it (from a study with `study_metric`)."""
    result = {k: v for k, v in row.items() if k not in ("run_id", "study", "method_label")}
    return StoredRun(
        row["run_id"],
        row["study"],
        row["method_label"],
        RunResult.from_dict(result),
        study_metric,
    )


def make_record(study_metric: str | None = None, **fields: Any) -> StoredRun:
    """`make_row` read as the store reads it."""
    return stored(make_row(**fields), study_metric)


def make_study(
    *,
    methods: Sequence[str] = ("full", "houlsby(hidden_size=64)", "bitfit"),
    seeds: Sequence[int] = (0, 1),
    sizes: Sequence[int | None] = (100, 1000),
    rates: Sequence[float] = (2e-5, 1e-4),
    data: Sequence[str] = ("sst2",),
) -> list[StoredRun]:
    """A grid of plausible runs: adapters beat fine-tuning with little data, fine-tuning
    degrades at high learning rates and overfits (its dev loss climbs after epoch 2)."""
    records = []
    for name in data:
        for size in sizes:
            for method in methods:
                for rate in rates:
                    for seed in seeds:
                        records.append(_plausible(name, size, method, rate, seed))
    return records


def _plausible(data: str, size: int | None, method: str, rate: float, seed: int) -> StoredRun:
    noise = random.Random(f"{data}{size}{method}{rate}{seed}").gauss(0, 0.01)
    grow = 0.02 * math.log10((size or 10_000) / 100)
    full = method == "full"
    score = BASE.get(method, 0.78) + (0.06 if full else 0.02) * grow
    score -= 0.08 * (rate / 1e-4) if full else 0.01 * abs(math.log10(rate / 1e-4))
    score = round(score + noise, 4)
    rise, low = (0.12, 0.46) if full else (0.02, 0.42)
    losses = [low + 0.15, low, low + rise, low + 2 * rise]
    scores = [score - 0.05, score, score - rise / 10, score - rise / 5]
    curve = [(round(loss + noise, 4), s) for loss, s in zip(losses, scores, strict=True)]
    return make_record(
        method=method,
        seed=seed,
        learning_rate=rate,
        train_size=size,
        data=data,
        test=score,
        dev=round(score + noise / 2, 4),
        epochs=curve,
        steps_per_epoch=max(1, (size or 6920) // 16),
    )


def test_records_become_runs_with_their_setting() -> None:
    runs = read_runs([make_record(train_size=None, test=0.9, dev=0.91)])
    run = runs[0]
    assert (run.setting.train_size, run.setting.full) == (6920, True)
    assert (run.test["accuracy"], run.dev["accuracy"]) == (0.9, 0.91)
    assert (run.learning_rate, run.seed) == (2e-5, 0)
    assert [p.step for p in run.curve] == [63, 126, 189]
    assert run.setting.label(with_model=False) == "sst2 · full (6920 examples)"


def test_empty_records_is_a_one_line_config_error() -> None:
    with pytest.raises(ConfigError, match="no result records") as error:
        read_runs([])
    assert "\n" not in str(error.value)


def test_a_record_without_its_metric_names_the_run() -> None:
    row = make_row(method="bitfit")
    del row["test"]["accuracy"]
    with pytest.raises(AdaptlabError, match=r"sst2/1000/bitfit/2e-05/0: metric 'accuracy'"):
        judge(read_runs([make_record(), stored(row)]))


def load_fixture_runs(path: Path) -> list[StoredRun]:
    """Stored runs exported from a real store, as the store reads them. The export (one JSON
    row per done run: run_id, study, method_label, study_metric, record) is

        [{"run_id": r.run_id, "study": r.study, "method_label": r.method_label,
          "study_metric": r.study_metric, "record": r.result.to_dict()}
         for r in adaptlab.study.load_records(STORE)]
    """
    return [
        StoredRun(
            row["run_id"],
            row["study"],
            row["method_label"],
            RunResult.from_dict(row["record"], str(path)),
            row["study_metric"],
        )
        for row in json.loads(path.read_text(encoding="utf-8"))
    ]
