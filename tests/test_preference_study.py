"""Preference tasks in studies: a `dpo` data entry with its options crossed with two betas
(`betas:`), planned with the ids `adaptlab train` records, run end to end on a tiny decoder into the
store and reported with a preference section; an option the entry's task does not read and a
built-in it cannot read are one line with nothing written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_cases import refused, unchanged
from generative_helpers import tiny_decoder
from study_helpers import FinishedStudy as Study
from study_helpers import save_spec

from adaptlab.report import write_report
from adaptlab.study.executors import LocalExecutor
from adaptlab.study.planner import plan_study, run_id
from adaptlab.study.runner import run_study
from adaptlab.study.spec import load_spec
from adaptlab.study.store import load_records

QUIET = LocalExecutor(progress=False)


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def write_spec(folder: Path, model: str, data: list[object], **more: object) -> Path:
    spec = {
        "name": "prefer",
        "models": [model],
        "data": data,
        "methods": ["lora"],
        "epochs": 1,
        "batch_size": 8,
        "learning_rates": [5e-3],
        "max_length": 32,
        "device": "cpu",
        **more,
    }
    return save_spec(folder / "prefer.yaml", spec)


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory) -> Study:
    folder = tmp_path_factory.mktemp("study")
    rows = [
        {"prompt": f"is {i} a number ?", "chosen": " yes", "rejected": " no"} for i in range(40)
    ]
    (folder / "pairs.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    model = tiny_decoder(tmp_path_factory.mktemp("decoder"))
    data = [{"pairs.jsonl": {"task": "dpo", "loss": "ipo", "max_new_tokens": 2}}]
    spec = write_spec(folder, model, data, betas=[0.1, 0.5])
    summary = run_study(spec, executor=QUIET)
    assert summary.planned == 2 and not summary.failed, [o.error for o in summary.outcomes]
    return Study(folder, spec, folder / "prefer.db")


def test_every_entry_is_a_run_with_its_options_and_pair_metrics(study: Study) -> None:
    records = load_records(study.store)
    assert sorted(r.result.spec.data_options["beta"] for r in records) == [0.1, 0.5]
    assert {r.result.spec.data_options["loss"] for r in records} == {"ipo"}
    assert sorted(r.method_label for r in records) == ["lora · beta=0.1", "lora · beta=0.5"]
    for record in records:
        assert record.run_id == run_id(record.result.spec)
        assert record.result.metric == "reward_accuracy"
        assert {"reward_accuracy", "reward_margin", "exact_match"} <= set(record.result.test)
    planned = {run.run_id for run in plan_study(load_spec(study.spec), study.folder)}
    assert planned == {r.run_id for r in records}


def test_the_report_has_a_preference_section(study: Study, tmp_path: Path) -> None:
    html = write_report(load_records(study.store), tmp_path / "r.html", title="t").read_text()
    assert "Preference tuning" in html
    assert "reward accuracy" in html and "reward margin" in html


@pytest.mark.parametrize(
    ("entry", "betas", "needle"),
    [
        ({"pairs.jsonl": {"task": "orpo", "loss": "ipo"}}, None, "loss"),
        ({"pairs.jsonl": {"task": "dpo", "beta": -1}}, None, "beta"),
        ({"countries-qa": {"task": "dpo"}}, None, "countries-qa"),
        ({"countries-qa-pairs": {"task": "sft"}}, None, "countries-qa-pairs"),
        ({"countries-qa-pairs": {}}, None, "task: dpo"),
        ({"pairs.jsonl": {"task": "dpo", "beta": 0.2}}, [0.1, 0.3], "sets its own beta"),
        ({"pairs.jsonl": {"task": "dpo"}}, [0.1, 0.1], "listed twice"),
        ({"pairs.jsonl": {"task": "dpo"}}, [], "betas: must be a list of numbers above 0"),
        ({"pairs.jsonl": {"task": "dpo"}}, [float("inf")], "must be a finite number above 0"),
        ({"pairs.jsonl": {"task": "dpo"}}, [float("nan")], "must be a finite number above 0"),
        ({"pairs.jsonl": {"task": "sft"}}, [0.1, 0.3], "which has none"),
        ({"pairs.jsonl": {"task": "reward", "beta": 0.1}}, None, "--beta"),
        ({"countries-qa": {"task": "reward"}}, None, "no preference pairs"),
        ({"pairs.jsonl": {"task": "reward", "center_rewards_coefficient": -1}}, None, "0 or more"),
        ({"arithmetic": {"task": "grpo", "num_generations": 1}}, None, "num_generations"),
    ],
)
def test_a_bad_preference_entry_or_beta_is_one_line(
    entry: dict[str, object],
    betas: list[float] | None,
    needle: str,
    study: Study,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    (tmp_path / "pairs.jsonl").write_text((study.folder / "pairs.jsonl").read_text())
    crossed = {"betas": betas} if betas is not None else {}
    spec = write_spec(tmp_path, "unused-model", [entry], **crossed)
    with unchanged(tmp_path):
        refused(["study", "run", str(spec), "--no-progress"], capsys, needle)


def test_reward_kto_and_grpo_entries_plan_with_their_options(study: Study, tmp_path: Path) -> None:
    (tmp_path / "pairs.jsonl").write_text((study.folder / "pairs.jsonl").read_text())
    data = [
        {"pairs.jsonl": {"task": "reward", "center_rewards_coefficient": 0.01}},
        {"countries-qa-unpaired": {"task": "kto", "desirable_weight": 1.2}},
        {"arithmetic": {"task": "grpo", "reward": "numeric", "num_generations": 4}},
    ]
    spec = write_spec(tmp_path, "unused-model", data)
    planned = plan_study(load_spec(spec), tmp_path)
    options = [run.spec.data_options for run in planned]
    assert [o["task"] for o in options] == ["reward", "kto", "grpo"]
    assert options[0]["center_rewards_coefficient"] == 0.01
    assert options[2]["num_generations"] == 4 and options[2]["reward"] == "numeric"
