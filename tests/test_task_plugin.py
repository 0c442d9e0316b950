"""A task is one file that registers itself: a toy task defined here, outside the package
(how often a text says "good", learnt by a one-output head and scored by the share of answers
within one of the truth), trains, evaluates, predicts and runs in a study like a built-in one.
Its runs are prepared by a preparer it registers too (`adaptlab.runs.preparers.prepares`): a
task sits below the engine, and what prepares its runs with the engine above it."""

from __future__ import annotations

import csv
import json
import random
from collections.abc import Hashable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import yaml
from cli_cases import run_cli

from adaptlab.data.labels import ParsedLabel
from adaptlab.data.readers import RawRow
from adaptlab.data.types import Example
from adaptlab.engine.run_objective import RunObjective
from adaptlab.errors import DataError
from adaptlab.records.spec import RunSpec
from adaptlab.runs.labelled_run import prepare_classification
from adaptlab.runs.preparers import PREPARERS, class_name, prepares
from adaptlab.study import ResultStore, run_study
from adaptlab.study.executors import LocalExecutor
from adaptlab.tasks import register_task
from adaptlab.tasks.labelled import LabelledTask
from adaptlab.tasks.prediction import Prediction
from adaptlab.tasks.registry import TASKS


class GoodCount(LabelledTask):
    """How many times a text says "good": a count, learnt as one number."""

    name = "good_count"
    summary = "how often a text says good"
    model_kind = "regression"
    primary_metric = "within_one"
    metrics = ("within_one",)
    paired_metrics = ("within_one", "mean_error")
    named_labels = False
    min_labels = 0
    stratified_by = "stratified by count"

    def parse_label(self, row: RawRow, separator: str) -> ParsedLabel:
        assert isinstance(row.label, str)
        if not row.label.isdigit():
            raise DataError(f"{row.where}: {row.label!r} is not a count")
        return float(row.label)

    def label_value(self, label: ParsedLabel, index: Any) -> float:
        assert isinstance(label, float)
        return label

    def stratum(self, label: Hashable, outside: Hashable) -> Hashable:
        return label

    def placeholder(self, text: str) -> Example:
        return Example(text=text, label=0.0)

    def target(self, label: Any, label_count: int) -> float:
        return float(label)

    def scores(
        self, outputs: np.ndarray, labels: np.ndarray, label_names: Sequence[str]
    ) -> dict[str, float]:
        error = np.abs(outputs.reshape(-1) - labels.reshape(-1))
        return {"within_one": float((error <= 1).mean()), "mean_error": float(error.mean())}

    def prediction(
        self, text: str, logits: torch.Tensor, marks: torch.Tensor, label_names: Sequence[str]
    ) -> Prediction:
        return Prediction(text, round(float(logits.reshape(-1)[0])), None)


PREPARED: list[str] = []
"""The data of every run the toy task's own preparer prepared."""


def prepare_counts(task: GoodCount, spec: RunSpec, device: torch.device) -> RunObjective:
    """The toy task's runs: prepared as a labelled task's are, each one noted."""
    PREPARED.append(spec.data)
    return prepare_classification(task, spec, device)


@pytest.fixture(scope="module", autouse=True)
def good_count() -> Any:
    """The toy task and its preparer, registered for this module's tests and taken out after
    them."""
    task = register_task(GoodCount())
    prepares(GoodCount)(prepare_counts)
    yield task
    TASKS._entries.pop(task.name)
    PREPARERS._entries.pop(class_name(GoodCount))


def write_counts(path: Path, rows: int = 80) -> Path:
    """Texts saying "good" 0 to 3 times among filler words, with that count as the label."""
    rng = random.Random(0)
    with path.open("w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(["text", "label"])
        for i in range(rows):
            count = i % 4
            words = ["good"] * count + [rng.choice(["a", "film", "plot", "cast"]) for _ in range(4)]
            rng.shuffle(words)
            writer.writerow([" ".join(words), str(count)])
    return path


def test_a_task_registered_outside_trains_evaluates_and_predicts(
    tiny_model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = write_counts(tmp_path / "counts.csv")
    run = tmp_path / "run"
    train = ["train", "--model", str(tiny_model), "--data", str(data), "--task", "good_count"]
    train += ["--method", "lora", "--epochs", "2", "--learning-rate", "1e-2", "--out", str(run)]
    code, _, err = run_cli([*train, "--device", "cpu"], capsys)
    assert code == 0, err
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["data"]["task"] == "good_count"
    assert metrics["metric"] == "within_one"
    assert set(metrics["test"]) == {"within_one", "mean_error"}
    assert metrics["judged_by"]["metric"] == "within_one"
    assert PREPARED[-1] == str(data)  # its own preparer, not only the labelled tasks' one

    code, out, err = run_cli(
        ["eval", "--adapter", str(run), "--model", str(tiny_model), "--data", str(data),
         "--task", "good_count", "--json"],
        capsys,
    )  # fmt: skip
    assert code == 0, err
    scored = json.loads(out)
    assert scored["judged_by"] == "within_one"
    assert scored["within_one"] == pytest.approx(metrics["test"]["within_one"])

    texts = tmp_path / "texts.txt"
    texts.write_text("good good film\na plot\n")
    code, out, err = run_cli(
        ["predict", "--adapter", str(run), "--model", str(tiny_model), "--input", str(texts),
         "--jsonl"],
        capsys,
    )  # fmt: skip
    assert code == 0, err
    predictions = [json.loads(line) for line in out.splitlines()]
    assert [p["text"] for p in predictions] == ["good good film", "a plot"]
    assert all(isinstance(p["label"], int) for p in predictions)


def test_a_task_registered_outside_runs_in_a_study(tiny_model: Path, tmp_path: Path) -> None:
    data = write_counts(tmp_path / "counts.csv")
    spec = tmp_path / "counts.yaml"
    spec.write_text(
        yaml.safe_dump(
            {
                "name": "counts",
                "models": [str(tiny_model)],
                "data": [{str(data): {"task": "good_count"}}],
                "methods": ["lora", "bitfit"],
                "seeds": [0],
                "epochs": 1,
                "batch_size": 8,
                "device": "cpu",
            }
        )
    )
    summary = run_study(spec, executor=LocalExecutor(progress=False))
    assert not summary.failed and len(summary.outcomes) == 2
    with ResultStore(summary.store) as store:
        results = [stored.result for stored in store.records() if stored.result is not None]
    assert {r.data.task for r in results} == {"good_count"}
    assert all(r.metric == "within_one" and "within_one" in r.test for r in results)
