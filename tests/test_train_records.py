"""Typed run records: the spec's JSON form and run ids stay as adaptlab 0.1.0 wrote them, and
results of that version (store rows, metrics.json) still load, strictly typed."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from study_helpers import OLD_RECORD, old_record, write_spec

from adaptlab.errors import ConfigError
from adaptlab.methods.registry import make_config
from adaptlab.records.config import TrainConfig
from adaptlab.records.result import RunResult, read_result
from adaptlab.records.spec import RunSpec
from adaptlab.report import render_report
from adaptlab.study.executors import LocalExecutor
from adaptlab.study.planner import plan_study, run_id
from adaptlab.study.runner import run_study
from adaptlab.study.spec import load_spec
from adaptlab.study.store import ResultStore, load_records

# Ids computed with adaptlab 0.1.0's RunSpec (method given as names or {name: options}).
IDS_OF_0_1_0 = [
    ("53f338dea59b", RunSpec.build("minilm-l6", "rotten-tomatoes")),
    (
        "3eb25a725743",
        RunSpec.build(
            "minilm-l6",
            "rotten-tomatoes",
            "lora+bitfit",
            train_size=1000,
            train=TrainConfig(epochs=3, seed=2),
        ),
    ),
    (
        "6ac6a782e959",
        RunSpec.build(
            "minilm-l6",
            "reviews.csv",
            {"houlsby": {"hidden_size": 64}},
            train=TrainConfig(epochs=2, batch_size=8, learning_rate=3e-4, seed=1, max_length=64),
            data_options={"label_column": "stars", "text_column": "body"},
            device="cuda",
        ),
    ),
    (
        "11738c8c4a4d",
        RunSpec.build(
            "minilm-l6",
            "rotten-tomatoes",
            [{"lora": {"rank": 4}}, {"bitfit": {}}],
            train_size=100,
            train=TrainConfig(epochs=1, batch_size=16, seed=0),
        ),
    ),
    (
        "6a0738578ad2",
        RunSpec.build(
            "minilm-l6", "rotten-tomatoes", "full", train_size=100, train=TrainConfig(epochs=1)
        ),
    ),
]

OLD_SPEC_JSON = (
    '{"model": "minilm-l6", "data": "rotten-tomatoes", "methods": [{"name": "houlsby", '
    '"config": {"hidden_size": 64, "activation": "tanh", "init_std": 0.01, "train_norms": '
    'true}}], "train_size": null, "train": {"epochs": 10, "batch_size": 16, "learning_rate": '
    '0.0001, "warmup_ratio": 0.1, "weight_decay": 0.01, "max_grad_norm": 1.0, "max_length": '
    '128, "eval_batch_size": 64, "seed": 0}, "data_options": {}, "device": "cpu"}'
)
"""`json.dumps(spec.to_dict())` of the default spec, as 0.1.0 wrote it (order included)."""


@pytest.mark.parametrize(("expected", "spec"), IDS_OF_0_1_0)
def test_run_ids_are_those_of_earlier_versions(expected: str, spec: RunSpec) -> None:
    assert run_id(spec) == expected
    assert run_id(RunSpec.from_dict(spec.to_dict())) == expected  # what a store gives back


def test_the_spec_json_is_byte_identical_to_earlier_versions() -> None:
    assert json.dumps(RunSpec.build("minilm-l6", "rotten-tomatoes").to_dict()) == OLD_SPEC_JSON


@dataclass(frozen=True)
class _WithStack(RunSpec):
    """A spec with a field added later, the way new stages extend it."""

    stack: tuple[str, ...] = ()


def test_a_field_added_with_a_default_keeps_existing_ids() -> None:
    expected, spec = IDS_OF_0_1_0[1]
    extended = _WithStack(**{name: getattr(spec, name) for name in spec.__dataclass_fields__})
    assert run_id(extended) == expected
    stacked = replace(extended, stack=("runs/lang",))
    assert stacked.to_dict()["stack"] == ["runs/lang"]
    assert run_id(stacked) != expected


def test_the_spec_takes_validated_configs_and_build_takes_user_forms() -> None:
    spec = RunSpec.build("m", "d", [{"lora": {"rank": 4}}, "bitfit"])
    assert spec.methods == (make_config("lora", {"rank": 4}), make_config("bitfit"))
    assert spec == RunSpec.build("m", "d", {"lora": {"rank": 4}, "bitfit": {}})
    with pytest.raises(ConfigError, match="tuple of method configs"):
        RunSpec("m", "d", "lora")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="'lora' is given twice"):
        RunSpec("m", "d", (make_config("lora"), make_config("lora")))
    with pytest.raises(ConfigError, match="unknown method 'lorra'"):
        RunSpec.build("m", "d", "lorra")
    with pytest.raises(ConfigError, match="train-size must be a positive integer"):
        RunSpec.build("m", "d", train_size=0)


def test_a_result_of_0_1_0_round_trips_exactly() -> None:
    data = old_record()
    result = RunResult.from_dict(data)
    assert result.to_dict() == data
    assert json.dumps(result.to_dict(), indent=2) + "\n" == OLD_RECORD.read_text()
    assert result.best.dev_metrics["accuracy"] == result.dev["accuracy"]
    assert run_id(result.spec) == "34d3ee13b9cd"


def test_fields_older_rows_lack_take_their_unknown_value() -> None:
    data = old_record()
    del data["adapter_tensor_bytes"]  # absent from the rows of the first 0.1.0 stores
    result = RunResult.from_dict(data)
    assert result.adapter_tensor_bytes is None and result.analysis is None
    del data["spec"]["train"]["eval_batch_size"]
    assert RunResult.from_dict(data).spec.train.eval_batch_size == 64


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        (["trainable_parameters"], "12", r"trainable_parameters: expected an integer .*got '12'"),
        (["total_parameters"], True, r"total_parameters: expected an integer .*, got True"),
        (["epochs", 0, "dev_metrics"], {"accuracy": "x"}, r"dev_metrics\.accuracy: expected a"),
        (["spec", "train", "epochs"], 2.5, r"spec\.train\.epochs: expected an integer"),
        (["spec", "methods", 0, "config"], {"hidden_size": "big"}, r"spec\.methods: houlsby"),
        (["data", "task"], "ranking", r"data\.task: expected one of single_label"),
        (["versions"], ["0.1.0"], r"versions: expected a JSON object"),
        (["best_epoch"], 3, r"best_epoch 3 is not one of its epochs"),
        (["colour"], "blue", r"colour: unknown field"),
    ],
)
def test_a_field_of_the_wrong_type_is_one_line_naming_it(
    path: list[Any], value: Any, message: str
) -> None:
    data = old_record()
    target = data
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    with pytest.raises(ConfigError, match=message) as error:
        RunResult.from_dict(data, where="run abc")
    assert str(error.value).startswith("run abc: ") and "\n" not in str(error.value)


def test_a_missing_field_is_named() -> None:
    data = old_record()
    del data["test"]
    with pytest.raises(ConfigError, match="result: test: missing"):
        RunResult.from_dict(data)


def test_an_old_run_folder_loads(tmp_path: Path) -> None:
    (tmp_path / "metrics.json").write_text(OLD_RECORD.read_text())
    assert read_result(tmp_path / "metrics.json").spec.train_size == 100
    (tmp_path / "metrics.json").write_text("{not json")
    with pytest.raises(ConfigError, match="cannot read run result"):
        read_result(tmp_path / "metrics.json")


def test_a_store_of_0_1_0_resumes_without_redoing_its_runs(tmp_path: Path) -> None:
    spec_path = write_spec(
        tmp_path,
        "minilm-l6",
        "rotten-tomatoes",
        methods=["houlsby"],
        seeds=[0],
        train_sizes=[100],
        batch_size=16,
    )
    (run,) = plan_study(load_spec(spec_path), tmp_path)
    assert run.run_id == "34d3ee13b9cd"  # the fixture's run, planned by today's code
    store = tmp_path / "tiny.db"
    with ResultStore(store) as results:
        results.start(run)
    with sqlite3.connect(store) as db:  # the row exactly as 0.1.0 finished it
        db.execute(
            "UPDATE runs SET status = 'done', record = ?, finished_at = started_at",
            (json.dumps(old_record(), separators=(",", ":")),),
        )
    db.close()
    summary = run_study(spec_path, executor=LocalExecutor(progress=False))
    assert (summary.planned, summary.done_before, summary.outcomes) == (1, 1, [])
    (stored,) = load_records(store)
    assert stored.result.to_dict() == old_record()
    assert "houlsby" in render_report([stored], title="old")


def test_a_malformed_row_names_the_store_and_run(tmp_path: Path) -> None:
    spec_path = write_spec(tmp_path, "minilm-l6", "rotten-tomatoes", methods=["lora"], seeds=[0])
    (run,) = plan_study(load_spec(spec_path), tmp_path)
    store = tmp_path / "tiny.db"
    broken = {**old_record(), "test_loss": "low"}
    with ResultStore(store) as results:
        results.start(run)
        results.finish(run.run_id, replace(RunResult.from_dict(old_record()), spec=run.spec))
    with sqlite3.connect(store) as db:
        db.execute("UPDATE runs SET record = ?", (json.dumps(broken),))
    db.close()
    with pytest.raises(ConfigError, match=rf"tiny\.db: run {run.run_id}: test_loss: expected"):
        load_records(store)
