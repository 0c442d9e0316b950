"""lm-evaluation-harness scores in studies (`harness:`): each sft run of a tiny word-level
Llama is scored in memory after training on the local task files of tests/data/lm_eval; its
record holds the scores (equal to `evaluate` on its saved adapter), a kept run folder holds
lm-eval's own results file, the report shows a table per task, and the scores are no part of a
run's id; every spec the harness cannot score is one line naming the key, with nothing
written."""

from __future__ import annotations

import json
import re
import statistics
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
import yaml
from cli_cases import refused, unchanged, write_reviews
from lm_eval_helpers import CAPITALS, DATA, REVIEWS, TASKS, task_folder, word_llama
from study_helpers import FinishedStudy
from tiny_models import save_tiny_bert

from adaptlab.errors import ConfigError
from adaptlab.integrations.lm_eval import evaluate
from adaptlab.records.result import read_result
from adaptlab.report import render_report
from adaptlab.study.executors import LocalExecutor
from adaptlab.study.harness import HarnessRequest
from adaptlab.study.planner import plan_study
from adaptlab.study.runner import run_study
from adaptlab.study.spec import load_spec
from adaptlab.study.store import load_records

pytest.importorskip("lm_eval")

QUIET = LocalExecutor(progress=False)
LIMIT = 4
BRIER = "adaptlab_reviews_brier"
"""The reviews scored by the Brier score of the choices' probabilities: a continuous score,
which tells two models apart where accuracy on a few examples may not."""
SCORED = [*TASKS, BRIER]
HARNESS = {"tasks": SCORED, "include": "tasks", "num_fewshot": 0, "limit": LIMIT}


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@dataclass(frozen=True)
class Study(FinishedStudy):
    base: str


def write_spec(folder: Path, base: str, **keys: Any) -> Path:
    """A study of a LoRA on the capitals' questions (sft), two seeds, one epoch; `keys`
    replace top-level keys (None: drop it)."""
    spec = {
        "name": "lm",
        "models": [base],
        "data": [{"pairs.jsonl": {"task": "sft", "max_new_tokens": 2}}],
        "methods": [{"lora": {"targets": ["query", "value"], "alpha": 8.0}}],
        "seeds": [0, 1],
        "epochs": 1,
        "batch_size": 8,
        "learning_rates": [1e-2],
        "device": "cpu",
        "harness": HARNESS,
        **keys,
    }
    path = folder / "lm.yaml"
    path.write_text(yaml.safe_dump({k: v for k, v in spec.items() if v is not None}))
    return path


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory) -> Study:
    """The study, run once into its store; its task folder `tasks/` beside the spec."""
    folder = tmp_path_factory.mktemp("study")
    base = word_llama(folder / "llama")
    tasks = task_folder(folder / "tasks")
    brier = yaml.safe_load((tasks / "reviews.yaml").read_text())
    brier["task"] = BRIER
    brier["metric_list"] = [
        {"metric": "brier_score", "aggregation": "brier_score", "higher_is_better": False}
    ]
    (tasks / "brier.yaml").write_text(yaml.safe_dump(brier))
    rows = [json.loads(line) for line in (DATA / "capitals.jsonl").read_text().splitlines()]
    (folder / "pairs.jsonl").write_text(
        "".join(
            json.dumps({"prompt": f"Q: {row['question']}\nA:", "completion": f" {row['answer']}"})
            + "\n"
            for row in rows * 2
        )
    )
    spec = write_spec(folder, base)
    summary = run_study(spec, executor=QUIET)
    assert summary.planned == 2 and not summary.failed, [o.error for o in summary.outcomes]
    return Study(folder, spec, folder / "lm.db", base)


def test_each_record_holds_the_harness_scores(study: Study) -> None:
    import lm_eval

    records = load_records(study.store)
    assert len(records) == 2
    for record in records:
        scores = record.result.harness
        assert scores is not None
        assert (scores.tasks, scores.num_fewshot, scores.limit) == (tuple(SCORED), 0, LIMIT)
        assert scores.lm_eval_version == lm_eval.__version__
        assert set(scores.scores) == {REVIEWS, CAPITALS, BRIER}
        assert 0 < scores.scores[BRIER].metrics["brier_score"] < 2
        reviews, capitals = scores.scores[REVIEWS], scores.scores[CAPITALS]
        assert set(reviews.metrics) == {"acc", "acc_norm"} and "acc" in reviews.stderr
        assert set(capitals.metrics) == {"exact_match"}
        assert all(
            0 <= value <= 1
            for value in [*reviews.metrics.values(), capitals.metrics["exact_match"]]
        )
        assert record.result.to_dict()["harness"]["scores"][REVIEWS]["metrics"] == dict(
            reviews.metrics
        )


def test_the_scores_equal_evaluate_on_the_saved_adapter_and_lm_evals_file_is_kept(
    study: Study, tmp_path: Path
) -> None:
    planned = plan_study(load_spec(study.spec), study.folder)[0]
    kept = replace(planned, keep=True).placed(tmp_path / "kept")
    outcome = kept.execute(False)
    assert outcome.result is not None, outcome.error
    run = Path(str(kept.out))
    scores = outcome.result.harness
    assert scores is not None and read_result(run / "metrics.json").harness == scores
    (written,) = (run / "lm_eval").iterdir()
    document = json.loads(written.read_text())
    assert document["n-samples"][REVIEWS]["effective"] == LIMIT
    options = {"include": study.folder / "tasks", "num_fewshot": 0, "limit": LIMIT}
    theirs = evaluate(
        run, SCORED, model=study.base, builtin_tasks=False, out=tmp_path / "evaluated", **options
    ).results["results"]
    base = evaluate(None, [BRIER], model=study.base, builtin_tasks=False, **options)
    compared = 0
    for task, found in scores.scores.items():
        for metric, value in found.metrics.items():
            assert value == pytest.approx(theirs[task][f"{metric},none"], abs=1e-4)
            assert value == pytest.approx(document["results"][task][f"{metric},none"], abs=1e-12)
            compared += 1
        for metric, error in found.stderr.items():
            assert error == pytest.approx(theirs[task][f"{metric}_stderr,none"], abs=1e-4)
    assert compared == 4
    brier = scores.scores[BRIER].metrics["brier_score"]
    assert abs(brier - base.results["results"][BRIER]["brier_score,none"]) > 1e-3  # trained


def test_the_report_shows_a_table_per_harness_task(study: Study) -> None:
    records = load_records(study.store)
    page = render_report(records, title="lm")
    found = re.search(r'<section id="harness">(.*?)</section>', page, re.S)
    assert found is not None
    body = found.group(1)
    assert "<h2>lm-evaluation-harness</h2>" in body
    assert f"<h3>{REVIEWS}</h3>" in body and f"<h3>{CAPITALS}</h3>" in body
    assert "<th>acc</th>" in body and "<th>acc_norm</th>" in body
    assert "<th>exact match</th>" in body and "<th>seeds</th>" in body
    accs = [(r.result.harness.scores[REVIEWS].metrics["acc"]) for r in records if r.result.harness]
    mean, std = statistics.fmean(accs), statistics.stdev(accs)
    assert f"<td>{mean:.3f} ± {std:.3f}</td>" in body and "<td>2</td>" in body
    assert f"at most {LIMIT} examples a task" in body


def test_a_study_without_harness_scores_has_no_such_section(study: Study) -> None:
    records = load_records(study.store)
    plain = [replace(r, result=replace(r.result, harness=None)) for r in records]
    assert 'id="harness"' not in render_report(plain, title="lm")


def test_the_harness_is_no_part_of_a_runs_id(study: Study, tmp_path: Path) -> None:
    spec = load_spec(study.spec)
    scored = [run.run_id for run in plan_study(spec, study.folder)]
    plain = [
        run.run_id for run in plan_study(spec.model_copy(update={"harness": None}), study.folder)
    ]
    assert scored == plain and len(set(scored)) == 2
    stored = {record.run_id for record in load_records(study.store)}
    assert stored == set(scored)


# --- refusals ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("keys", "needles"),
    [
        ({"harness": {**HARNESS, "shots": 1}}, ("harness.shots", "unknown key 'shots'", "tasks")),
        ({"harness": {**HARNESS, "limit": 0}}, ("harness.limit", "greater than 0")),
        ({"harness": {**HARNESS, "limit": -5}}, ("harness.limit", "greater than 0")),
        ({"harness": {**HARNESS, "limit": "all"}}, ("harness.limit", "integer")),
        ({"harness": {**HARNESS, "num_fewshot": -1}}, ("harness.num_fewshot", "0")),
        ({"harness": {**HARNESS, "batch_size": 0}}, ("harness.batch_size", "greater than 0")),
        ({"harness": {"limit": 4}}, ("required key 'tasks' is missing",)),
        ({"harness": {"tasks": []}}, ("harness.tasks", "at least 1 item")),
        ({"harness": {"tasks": [REVIEWS, REVIEWS]}}, ("harness.tasks", "listed twice")),
        ({"harness": {"tasks": [""]}}, ("harness.tasks[0]", "at least 1 character")),
        ({"harness": [REVIEWS]}, ("harness", "valid dictionary")),
        ({"harness": {**HARNESS, "include": "missing"}}, ("include missing", "is not there")),
        ({"harness": {**HARNESS, "include": "lm.yaml"}}, ("include lm.yaml", "is a file")),
        (
            {"harness": {**HARNESS, "tasks": [REVIEWS, "adaptlab_reveiws"]}},
            ("harness:", "'adaptlab_reveiws'", "lm-eval ls tasks"),
        ),
        (
            {"data": ["reviews.csv"]},
            ("data reviews.csv names no task:", "causal-lm, sft, chat, seq2seq"),
        ),
        (
            {"data": ["rotten-tomatoes"]},
            ("data rotten-tomatoes trains task single_label", "sequence-classification head"),
        ),
        ({"data": [{"docs.txt": {"task": "mlm"}}]}, ("docs.txt trains task mlm", "masked-LM")),
        ({"models": ["minilm-l6"]}, ("model minilm-l6 is an encoder", "drop harness:")),
    ],
)
def test_a_harness_that_cannot_score_the_study_is_one_line_and_writes_nothing(
    study: Study, tmp_path: Path, capsys: pytest.CaptureFixture[str], keys: dict[str, Any],
    needles: tuple[str, ...],
) -> None:  # fmt: skip
    (tmp_path / "tasks").symlink_to(study.folder / "tasks")
    write_reviews(tmp_path / "reviews.csv")
    (tmp_path / "docs.txt").write_text("a document\n" * 20)
    spec = write_spec(tmp_path, study.base, **keys)
    with unchanged(tmp_path):
        refused(["study", "run", str(spec)], capsys, f"{spec} line", *needles)


def test_a_sequence_study_takes_no_harness(study: Study, tmp_path: Path) -> None:
    write_reviews(tmp_path / "a.csv")
    write_reviews(tmp_path / "b.csv")
    spec = write_spec(
        tmp_path, study.base, data=None, sequence=["a.csv", "b.csv"], strategies=["sequential"],
        harness={"tasks": [REVIEWS]},
    )  # fmt: skip
    with pytest.raises(ConfigError) as error:
        load_spec(spec)
    assert "a sequence study takes no harness:" in str(error.value)


def test_without_lm_eval_installed_the_spec_says_how_to_install_it(
    study: Study,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setitem(sys.modules, "lm_eval", None)
    spec = write_spec(tmp_path, study.base, harness={"tasks": [REVIEWS]})
    with unchanged(tmp_path):
        line = refused(["study", "run", str(spec)], capsys)
    assert line.endswith(
        "harness: a study's harness: needs lm-evaluation-harness: pip install 'adaptlab[harness]'"
    )


def test_a_run_that_trains_no_language_model_is_refused_naming_it(study: Study) -> None:
    planned = plan_study(load_spec(study.spec), study.folder)[0]
    labelled = replace(planned.spec, data="reviews.csv", data_options={})
    with pytest.raises(ConfigError) as error:
        HarnessRequest((REVIEWS,)).scorer(labelled, None)
    message = str(error.value)
    assert "\n" not in message
    assert f"the run of {study.base} on reviews.csv trains a single_label model" in message


def test_an_encoder_found_only_when_its_run_loads_fails_that_run_in_one_line(
    study: Study, tmp_path: Path
) -> None:
    encoder = save_tiny_bert(str(tmp_path / "tiny-bert"))
    (tmp_path / "pairs.jsonl").write_text((study.folder / "pairs.jsonl").read_text())
    harness = {**HARNESS, "include": str(study.folder / "tasks")}
    spec = write_spec(tmp_path, encoder, seeds=[0], harness=harness)
    summary = run_study(spec, executor=QUIET)
    (outcome,) = summary.outcomes
    assert outcome.result is None and outcome.error is not None and "\n" not in outcome.error
    assert "an encoder" in outcome.error and encoder in outcome.error
