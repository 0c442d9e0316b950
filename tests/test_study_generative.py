"""Generative tasks in studies: data entries naming `causal-lm`, `sft` or `chat` with their
options, and the built-in generative corpora, planned with stable ids (the same as `adaptlab
train` records for the same run), run end to end on a tiny decoder into the store, counted by
`study status` and reported; every invalid generative option is one line naming the file, line
and entry, with nothing written."""

from __future__ import annotations

import hashlib
import re
import sqlite3
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from cli_cases import refused, run_cli, unchanged
from generative_helpers import tiny_decoder, write_pairs
from serve_helpers import CHAT_TEMPLATE
from study_helpers import FinishedStudy, save_spec, write_reviews

from adaptlab.cli.generation_options import GenerationOptions
from adaptlab.data.identity import content_digest
from adaptlab.records.config import TrainConfig
from adaptlab.records.spec import RunSpec
from adaptlab.report import write_report
from adaptlab.study.executors import LocalExecutor
from adaptlab.study.planner import plan_study, run_id
from adaptlab.study.runner import run_study
from adaptlab.study.spec import load_spec
from adaptlab.study.status import study_status
from adaptlab.study.store import load_records

QUIET = LocalExecutor(progress=False)
DOCUMENTS = [f"document {i} says {' '.join(str(j) for j in range(i % 9 + 3))}" for i in range(40)]


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@dataclass(frozen=True)
class Study(FinishedStudy):
    planned: tuple[str, ...]


def write_study(folder: Path, model: str) -> Path:
    """A study of an sft data file and a causal-lm text file, 2 methods, 1 epoch."""
    write_pairs(folder / "pairs.jsonl", 40)
    (folder / "docs.txt").write_text("\n".join(DOCUMENTS) + "\n")
    spec = {
        "name": "gen",
        "models": [model],
        "data": [
            {"pairs.jsonl": {"task": "sft", "max_new_tokens": 3, "pack": False}},
            {"docs.txt": {"task": "causal-lm"}},
        ],
        "methods": ["lora", "houlsby"],
        "epochs": 1,
        "batch_size": 8,
        "device": "cpu",
    }
    return save_spec(folder / "gen.yaml", spec)


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory) -> Study:
    """The study, planned and run once."""
    folder = tmp_path_factory.mktemp("study")
    spec = write_study(folder, tiny_decoder(tmp_path_factory.mktemp("decoder")))
    planned = tuple(run.run_id for run in plan_study(load_spec(spec), folder))
    summary = run_study(spec, executor=QUIET)
    assert summary.planned == 4 and not summary.failed, [o.error for o in summary.outcomes]
    return Study(folder, spec, folder / "gen.db", planned)


def test_every_cell_is_stored_with_its_task_metrics_and_generations(study: Study) -> None:
    records = load_records(study.store)
    assert sorted(r.run_id for r in records) == sorted(study.planned)
    by_task = {
        task: [r for r in records if r.result.data.task == task] for task in ("sft", "causal-lm")
    }
    assert {len(found) for found in by_task.values()} == {2}
    for record in records:
        assert record.run_id == run_id(record.result.spec)
    for record in by_task["sft"]:
        result = record.result
        assert result.spec.data_options == {
            "task": "sft",
            "max_new_tokens": 3,
        }  # pack: false dropped
        assert result.metric == "exact_match" and "perplexity" in result.test
        assert result.generations and all(g.prompt.strip() for g in result.generations)
        assert result.data.dropped == {"train": 0, "dev": 0, "test": 0}
    for record in by_task["causal-lm"]:
        result = record.result
        assert result.metric == "perplexity" and result.generations is None
        assert [epoch.epoch for epoch in result.epochs] == [1]
        assert result.epochs[0].dev_metrics["perplexity"] > 1
    with sqlite3.connect(study.store) as db:
        digests = dict(db.execute("SELECT json_extract(spec, '$.data'), data_digest FROM runs"))
    assert digests == {
        str(study.folder / n): content_digest(str(study.folder / n))
        for n in ("pairs.jsonl", "docs.txt")
    }


def test_the_plan_keeps_its_ids_and_a_second_run_trains_nothing(study: Study) -> None:
    assert (
        tuple(run.run_id for run in plan_study(load_spec(study.spec), study.folder))
        == study.planned
    )
    again = run_study(study.spec, executor=QUIET)
    assert again.done_before == 4 and again.outcomes == []


def test_study_status_counts_the_generative_runs(
    study: Study, capsys: pytest.CaptureFixture[str]
) -> None:
    (status,) = study_status(study.store)
    assert (status.planned, status.done, status.failed, status.left) == (4, 4, 0, 0)
    assert status.changed == [] and {m.done for m in status.methods.values()} == {2}
    code, out, err = run_cli(["study", "status", str(study.store)], capsys)
    assert code == 0 and "study gen" in out, err


def test_the_report_shows_generative_metrics_perplexity_curves_and_generations(
    study: Study, capsys: pytest.CaptureFixture[str]
) -> None:
    out = study.folder / "gen.html"
    code, _, err = run_cli(["study", "report", str(study.store), "-o", str(out)], capsys)
    assert code == 0, err
    page = out.read_text(encoding="utf-8")
    assert "exact match on pairs (generated) (the task" in page
    assert "perplexity on docs (causal LM) (the task" in page
    assert "<th>test perplexity</th>" in page and "<th>test exact match</th>" in page
    generative = re.search(r'<section id="generative">(.*?)</section>', page, re.S)
    assert generative is not None
    body = generative.group(1)
    assert body.count('alt="dev perplexity against epochs') == 2
    assert body.count("what is ") >= 1 and "<th>reference</th>" in body
    assert "<th>lora</th>" in body and "<th>houlsby</th>" in body
    again = write_report(load_records(study.store), study.folder / "again.html", title="gen")
    assert again.read_text(encoding="utf-8").count('alt="dev perplexity against epochs') == 2


BUILT_INS = {
    "name": "built-ins",
    "models": ["smollm2-135m"],
    "data": [
        "rotten-tomatoes",
        {"countries-qa": {"task": "sft", "max_new_tokens": 8, "stop": ["\n"], "pack": True}},
        {"rotten-tomatoes-instructions": {"task": "sft", "max_new_tokens": 32}},
    ],
    "methods": ["lora"],
    "seeds": [0, 1],
    "device": "cpu",
}
PINNED = (6, "47c05861db17299a")
"""How many runs the built-in study plans, and a digest of their ids in plan order (the
generative runs' ids hash the generation defaults of their learning rate and LoRA)."""


def cli_run_id(model: str, data: str, seed: int, **generation: object) -> str:
    """The id `adaptlab train --task sft ...` gives the same run."""
    options = {"task": "sft", **GenerationOptions(**generation).load_options()}  # type: ignore[arg-type]
    spec = RunSpec.build(
        model, data, "lora", train=TrainConfig(seed=seed), data_options=options, device="cpu"
    )
    return run_id(spec)


def test_built_in_generative_corpora_plan_beside_classification_with_the_train_ids(
    tmp_path: Path,
) -> None:
    (tmp_path / "countries-qa").write_text("a file named like the built-in\n")
    path = tmp_path / "b.yaml"
    path.write_text(yaml.safe_dump(BUILT_INS, sort_keys=False))
    plan = plan_study(load_spec(path), tmp_path)
    ids = [run.run_id for run in plan]
    assert [(run.spec.data, run.spec.task) for run in plan[:3]] == [
        ("rotten-tomatoes", None),
        ("countries-qa", "sft"),
        ("rotten-tomatoes-instructions", "sft"),
    ]
    assert all(run.data_digest is None for run in plan)  # built-ins, whatever lies beside
    assert plan[1].spec.data_options == {
        "task": "sft",
        "pack": True,
        "max_new_tokens": 8,
        "stop": ["\n"],
    }
    for seed in (0, 1):
        mine = [run for run in plan if run.spec.train.seed == seed]
        assert mine[1].run_id == cli_run_id(
            "smollm2-135m", "countries-qa", seed, pack=True, max_new_tokens=8, stop=["\n"]
        )
        assert mine[2].run_id == cli_run_id("smollm2-135m", "rotten-tomatoes-instructions", seed)
    alone = {**BUILT_INS, "data": ["rotten-tomatoes"]}
    path.write_text(yaml.safe_dump(alone, sort_keys=False))
    classification = [run.run_id for run in plan_study(load_spec(path), tmp_path)]
    assert classification == [ids[0], ids[3]]  # the classification runs keep their ids
    digest = hashlib.sha256(",".join(ids).encode()).hexdigest()[:16]
    assert (len(ids), digest) == PINNED


def test_a_chat_template_is_read_from_the_spec_folder_and_kept_absolute(tmp_path: Path) -> None:
    (tmp_path / "templates").mkdir()
    (tmp_path / "templates" / "chat.jinja").write_text(CHAT_TEMPLATE)
    path = tmp_path / "c.yaml"
    path.write_text(
        "name: c\nmodels: [smollm2-135m]\nmethods: [lora]\ndata:\n"
        "  - friends-chat: {task: chat, chat_template: templates/chat.jinja}\n"
    )
    (run,) = plan_study(load_spec(path), tmp_path)
    template = str((tmp_path / "templates" / "chat.jinja").resolve())
    assert run.spec.data_options == {"task": "chat", "chat_template": template}


HEAD = "name: bad\nmodels: [smollm2-135m]\nmethods: [lora]\n"


@pytest.mark.parametrize(
    ("body", "needles"),
    [
        (
            "data:\n  - pairs.jsonl:\n      task: sft\n      max_new_tokens: 0\n",
            ["line 5, data[0]: pairs.jsonl: max_new_tokens must be a whole number"],
        ),
        (
            "data: [{pairs.jsonl: {task: sft, pack: 'yes'}}]\n",
            ["line 4, data[0]", "pack must be true or false"],
        ),
        ("data: [{pairs.jsonl: {task: sft, stop: [a, b, c, d, e]}}]\n", ["stop takes at most 4"]),
        (
            "data: [{pairs.jsonl: {task: chat, stop: 3}}]\n",
            ["stop must be a list of non-empty texts"],
        ),
        (
            "data: [{pairs.jsonl: {task: sft, prompt_column: ''}}]\n",
            ["prompt_column must be a non-empty"],
        ),
        (
            "data: [{pairs.jsonl: {task: sft, label_column: stars}}]\n",
            ["task sft takes no data option 'label_column'", "prompt_column"],
        ),
        (
            "data: [{pairs.jsonl: {task: sft, metric: accuracy}}]\n",
            ["task sft is not scored by 'accuracy'", "rougeL"],
        ),
        (
            "data: [rotten-tomatoes, {reviews.csv: {train_on_prompt: true}}]\n",
            ["data[1]", "train_on_prompt is an option of the generative tasks", "sft"],
        ),
        ("data: [countries-qa]\n", ["countries-qa is a built-in generative corpus", "task: sft"]),
        ("data: [{rotten-tomatoes: {task: sft}}]\n", ["use rotten-tomatoes-instructions"]),
        ("data: [{friends-chat: {task: causal-lm}}]\n", ["not plain text", "sft or chat"]),
        (
            "data: [{friends-chat: {task: sft}}]\n",
            ["friends-chat holds chats (messages)", "not prompt-completion", "(chat)"],
        ),
        (
            "data: [{pairs.jsonl: {task: sft}}]\nmetric: accuracy\n",
            ["line 5, metric", "task sft of data pairs.jsonl does not compute accuracy"],
        ),
        ("data: [{pairs.jsonl: {task: sft, packing: true}}]\n", ["unknown key 'packing'", "pack"]),
        (
            "data: [{pairs.jsonl: {task: chat, chat_template: missing.jinja}}]\n",
            ["chat template", "missing.jinja is not a file"],
        ),
        (
            "sequence: [{docs.txt: {task: causal-lm, pack: true}}, rotten-tomatoes]\n"
            "objective: causal-lm\nstrategies: [sequential]\n",
            ["line 4, sequence", "stage docs.txt", "drop pack"],
        ),
    ],
)
def test_invalid_generative_entries_are_one_line_and_write_nothing(
    body: str, needles: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_pairs(tmp_path / "pairs.jsonl", 20)
    write_reviews(tmp_path / "reviews.csv")
    (tmp_path / "docs.txt").write_text("\n".join(DOCUMENTS) + "\n")
    spec = tmp_path / "bad.yaml"
    spec.write_text(HEAD + body)
    with unchanged(tmp_path):
        line = refused(["study", "run", str(spec)], capsys, *needles)
    assert "bad.yaml" in line or "missing.jinja" in line
