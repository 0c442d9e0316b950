"""A run's `metrics.json` (and a store's row, read the same way) holding a value no run measures
is refused as it is read, in one line naming the file and the field: a finite score outside its
metric's range, a NaN or infinite training loss or time, a negative count, step or size, a value
that is no number. The file is left as it was. Values a run does write still read back, a
diverged run's NaN or infinite scores and losses among them (the report shows them so)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from cli_cases import unchanged
from study_helpers import old_record

from adaptlab.errors import ConfigError
from adaptlab.records.metric_ranges import RANGES, metric_range
from adaptlab.records.result import RunResult, read_result
from adaptlab.tasks.registry import TASKS


def set_at(data: dict[str, Any], path: list[Any], value: Any) -> dict[str, Any]:
    """`data` with the value at `path` replaced (a new key added where it ends)."""
    target = data
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return data


@pytest.mark.parametrize(
    ("path", "value", "field", "expected"),
    [
        (["test", "accuracy"], 7.3, "test.accuracy", "a number from 0 to 1 (or a diverged"),
        (["dev", "accuracy"], -1, "dev.accuracy", "a number from 0 to 1"),
        (["test", "mcc"], 1.5, "test.mcc", "a number from -1 to 1"),
        (["test", "accuracy"], 10**400, "test.accuracy", "a number from 0 to 1"),
        (["test", "accuracy"], "0.9", "test.accuracy", "a number from 0 to 1"),
        (["test", "perplexity"], 0.5, "test.perplexity", "a finite number of at least 1"),
        (["test", "bleu"], 101.0, "test.bleu", "a number from 0 to 100"),
        (["test", "chosen_logps"], 3.0, "test.chosen_logps", "a finite number of at most 0"),
        (["epochs", 0, "dev_metrics", "accuracy"], 2.0, "epochs[0].dev_metrics.accuracy",
         "a number from 0 to 1"),
        (["epochs", 0, "dev_loss"], "low", "epochs[0].dev_loss", "a number, got 'low'"),
        (["epochs", 0, "train_loss"], math.nan, "epochs[0].train_loss", "a finite number, got"),
        (["epochs", 0, "train_loss"], -math.inf, "epochs[0].train_loss", "a finite number"),
        (["epochs", 0, "step"], -4, "epochs[0].step", "an integer of at least 0, got -4"),
        (["epochs", 0, "epoch"], 0, "epochs[0].epoch", "an integer of at least 1, got 0"),
        (["epochs", 0, "seconds"], -2.0, "epochs[0].seconds", "a finite number of at least 0"),
        (["test_loss"], None, "test_loss", "a number, got None"),
        (["data", "sizes", "train"], -100, "data.sizes.train", "an integer of at least 0"),
        (["trainable_parameters"], -1, "trainable_parameters", "an integer of at least 0"),
        (["parameter_groups", "all"], -1, "parameter_groups.all", "an integer of at least 0"),
        (["adapter_bytes"], -1, "adapter_bytes", "an integer of at least 0 or null"),
        (["wall_seconds"], math.nan, "wall_seconds", "a finite number of at least 0 or null"),
    ],
)  # fmt: skip
def test_a_value_no_run_measures_is_one_line_naming_the_file_and_field(
    tmp_path: Path, path: list[Any], value: Any, field: str, expected: str
) -> None:
    file = tmp_path / "run" / "metrics.json"
    file.parent.mkdir()
    file.write_text(json.dumps(set_at(old_record(), path, value)))
    with unchanged(tmp_path), pytest.raises(ConfigError) as error:
        read_result(file)
    message = str(error.value)
    assert message.startswith(f"{file}: {field}: expected {expected}"), message
    assert "\n" not in message


@pytest.mark.parametrize(
    ("path", "value", "field"),
    [
        (["test_classes"], [{"label": "a", "support": -1, "predicted": 0, "correct": 0}],
         "test_classes[0].support"),
        (["zero_shot"], [{"data": "d", "name": "d", "examples": 5, "loss": 0.1,
                          "metrics": {"accuracy": 1.2}, "composition": None}],
         "zero_shot[0].metrics.accuracy"),
        (["fusion_weights"], [{"site": "s", "block": 0, "role": "ffn", "weights": {"a": 1.5}}],
         "fusion_weights[0].weights.a"),
        (["threads"], {"threads": 0, "interop_threads": 1, "wait_policy": "PASSIVE",
                       "source": "default"}, "threads.threads"),
        (["harness"], {"lm_eval_version": "0.4", "tasks": ["t"], "num_fewshot": -1,
                       "limit": None, "scores": {}}, "harness.num_fewshot"),
        (["harness"], {"lm_eval_version": "0.4", "tasks": ["t"], "num_fewshot": None,
                       "limit": None, "scores": {"t": {"metrics": {"acc": 0.5},
                                                        "stderr": {"acc": -0.1}}}},
         "harness.scores.t.stderr.acc"),
    ],
)  # fmt: skip
def test_the_optional_parts_of_a_record_are_checked_as_well(
    path: list[Any], value: Any, field: str
) -> None:
    with pytest.raises(ConfigError, match=r"^run 7: ") as error:
        RunResult.from_dict(set_at(old_record(), path, value), where="run 7")
    assert str(error.value).startswith(f"run 7: {field}: expected "), str(error.value)


def test_values_runs_write_read_back(tmp_path: Path) -> None:
    data = old_record()
    data["test"] = {"accuracy": 1, "macro_f1": 0.0, "micro_f1": 1.0, "mcc": -1.0}
    data["dev"] = {**data["dev"], "reward_margin": -12.5, "my_score": 1e9, "perplexity": 1.0}
    data["epochs"][0]["train_loss"] = -0.3  # a policy-gradient loss may be negative
    file = tmp_path / "metrics.json"
    file.write_text(json.dumps(data))
    result = read_result(file)
    assert result.test["mcc"] == -1.0 and result.dev["reward_margin"] == -12.5
    assert result.best_epoch == data["best_epoch"]


def test_a_diverged_runs_nan_and_infinite_measurements_read_back(tmp_path: Path) -> None:
    data = old_record()
    data["test"] = {"accuracy": math.nan, "macro_f1": math.inf, "mcc": -math.inf}
    data["test_loss"] = math.nan
    data["epochs"][-1]["dev_loss"] = math.inf
    data["epochs"][-1]["dev_metrics"]["accuracy"] = math.nan
    file = tmp_path / "metrics.json"
    file.write_text(json.dumps(data))  # as Python writes them: NaN, Infinity
    result = read_result(file)
    assert math.isnan(result.test["accuracy"]) and result.test["mcc"] == -math.inf
    assert math.isnan(result.test_loss) and result.epochs[-1].dev_loss == math.inf


def test_every_metric_a_task_reports_has_a_stated_range() -> None:
    named = {
        metric
        for task in TASKS
        for metric in (*task.metrics, task.primary_metric, *task.paired_metrics)
    }
    assert named - set(RANGES) == set()
    assert metric_range("accuracy") == (0.0, 1.0) and metric_range("chrf") == (0.0, 100.0)
