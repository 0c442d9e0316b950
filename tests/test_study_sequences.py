"""Sequence studies: the spec's keys and errors, the grid, a tiny study end to end (stage rows,
the matrix, status in stages), resume from a stage, and a failed sequence."""

from __future__ import annotations

import sqlite3
import textwrap
from pathlib import Path
from typing import Any

import pytest
from sequence_study_helpers import write_sequence_spec, write_stages
from study_helpers import assert_spec_error, integrity, one_thread, write_spec_text
from tiny_models import save_tiny_bert

from adaptlab.continual import SequenceSpec, run_sequence
from adaptlab.continual import run as continual_run
from adaptlab.continual.checkpoint import SequenceCheckpoint
from adaptlab.continual.result import StageOutcome
from adaptlab.study.executors import LocalExecutor
from adaptlab.study.kind_sequences import sequence_folders
from adaptlab.study.runner import run_study
from adaptlab.study.sequence_plan import plan_sequences
from adaptlab.study.spec import load_spec
from adaptlab.study.status import study_status
from adaptlab.study.store import ResultStore, load_records, load_sequences

HEAD = "name: s\nmodels: [minilm-l6]\nmethods: [houlsby]\n"


@pytest.mark.parametrize(
    ("body", "line", "parts"),
    [
        (
            "data: [rotten-tomatoes]\nsequence: [reuters-r8]\nstrategies: [sequential]\n",
            5,
            ["sequence:", "not both"],
        ),
        ("sequence: [reuters-r8, rotten-tomatoes]\n", 1, ["needs strategies:"]),
        (
            "sequence: [reuters-r8]\nstrategies: [sequential, forget-me-not]\n",
            5,
            ["strategies[1]", "unknown strategy 'forget-me-not'", "replay"],
        ),
        (
            "sequence: [reuters-r8]\nstrategies: [{replay: {rat: 0.1}}]\n",
            5,
            ["strategies[0]", "unknown option 'rat'", "rate"],
        ),
        (
            "sequence: [reuters-r8]\nstrategies: [{replay: {rate: 2}}]\n",
            5,
            ["strategies[0]", "rate must be in (0, 1]"],
        ),
        (
            "sequence: [reuters-r8]\nstrategies: [replay, {strategy: replay}]\n",
            5,
            ["both labelled 'replay'"],
        ),
        (
            "sequence: [reuters-r8, wnut16-ner]\nstrategies: [sequential]\n",
            4,
            ["wnut16-ner is a token task", "single-label"],
        ),
        (
            "sequence: [reuters-r8, {tags.csv: {task: multi_label}}]\nstrategies: [sequential]\n",
            4,
            ["tags.csv is a multi_label task"],
        ),
        (
            "sequence: [reuters-r8, reuters-r8]\nstrategies: [sequential]\n",
            4,
            ["listed twice"],
        ),
        ("data: [rotten-tomatoes]\nstrategies: [replay]\n", 5, ["strategies", "sequence:"]),
        ("data: [rotten-tomatoes]\nsingle_stage: true\n", 5, ["single_stage", "sequence:"]),
        (
            "sequence: [reuters-r8]\nstrategies: [replay]\nmetric: macro_f1\n",
            6,
            ["no metric:", "accuracy"],
        ),
        ("sequence: [reuters-r8]\nstrategies: [replay]\nanalysis: [rsa]\n", 6, ["no analysis"]),
        ("sequence: [reuters-r8]\nstrategies: [replay]\ntest_size: 0\n", 6, ["test_size"]),
        ("seeds: [0]\n", 1, ["required key 'data' is missing", "sequence"]),
    ],
)
def test_sequence_spec_errors_are_one_line(
    tmp_path: Path, body: str, line: int, parts: list[str]
) -> None:
    assert_spec_error(write_spec_text(tmp_path, HEAD + body), line, parts)


def test_the_grid_is_methods_by_strategies_by_sizes_by_seeds_by_rates(tmp_path: Path) -> None:
    reviews = tmp_path / "reviews.csv"
    reviews.write_text("stars,text\n1,bad\n")
    path = write_spec_text(
        tmp_path,
        textwrap.dedent(
            """\
            name: s
            models: [minilm-l6]
            sequence: [reuters-r8, {reviews.csv: {label_column: stars}}]
            methods: [houlsby, {method: lora, epochs: 2}]
            strategies: [sequential, {replay: {rate: 0.05}}, {strategy: kd-logit, label: kd}]
            train_sizes: [100, 200]
            seeds: [0, 1]
            learning_rates: [1e-4, 1e-3]
            test_size: 50
            single_stage: true
            """
        ),
    )
    runs = plan_sequences(load_spec(path), tmp_path)
    assert len(runs) == 2 * 2 * 2 * 3 * 2 and len({run.run_id for run in runs}) == len(runs)
    first = runs[0]
    assert first.label == "houlsby · sequential"
    assert first.spec.stages == ("reuters-r8", str(reviews))
    assert first.spec.stage_options == ({}, {"label_column": "stars"})
    assert (first.spec.test_size, first.spec.single_stage) == (50, True)
    assert [run.strategy_label for run in runs[:6:2]] == ["sequential", "replay(rate=0.05)", "kd"]
    assert [run.spec.learning_rate() for run in runs[:2]] == [1e-4, 1e-3]
    assert [run.spec.train.epochs for run in runs[:12:6]] == [10, 2]
    assert {run.spec.train_size for run in runs[:24]} == {100, 200}  # seed 0 first
    assert {run.spec.train.seed for run in runs[:24]} == {0}
    assert runs[2].spec.strategy.to_dict() == {"rate": 0.05}
    again = SequenceSpec.from_dict(first.spec.to_dict())
    assert again == first.spec


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> str:
    return save_tiny_bert(str(tmp_path_factory.mktemp("tiny-bert")))


def test_a_sequence_study_stores_every_stage_and_the_matrix(
    model_dir: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stages = write_stages(tmp_path)
    spec = write_sequence_spec(tmp_path, model_dir, stages, single_stage=True, test_size=10)
    trained: list[tuple[str, ...]] = []
    train = continual_run._train_sequence

    def counting(spec: SequenceSpec, *args: Any, **kwargs: Any) -> Any:
        trained.append(spec.stages)
        return train(spec, *args, **kwargs)

    monkeypatch.setattr(continual_run, "_train_sequence", counting)
    with one_thread():
        summary = run_study(spec, executor=LocalExecutor(progress=False))
    assert len(summary.outcomes) == 2 and not summary.failed
    alone = [(stage,) for stage in stages[1:]]
    assert trained == [tuple(stages), *alone, tuple(stages)]  # stages alone: once per study
    store = tmp_path / "cl.db"
    assert integrity(store) == "ok"
    sequences = load_sequences(store, planned_only=True)
    assert [s.strategy_label for s in sequences] == ["sequential", "replay(rate=0.5)"]
    assert load_records(store) == []  # sequences are no single runs
    with ResultStore(store, create=False) as results:
        for stored in sequences:
            result = stored.result
            assert len(result.matrix) == 3 and all(len(row) == 3 for row in result.matrix)
            assert result.single_stage is not None and len(result.single_stage) == 3
            assert result.single_stage[1:] == sequences[0].result.single_stage[1:]
            assert result.scores.forward_transfer is not None
            assert all(len(s.epochs) == 1 and s.sizes["test"] <= 10 for s in result.stages)
            rows = results.stages(stored.run_id)
            assert [outcome.row("accuracy") for outcome, _ in rows] == list(result.matrix)
            assert [outcome.record for outcome, _ in rows] == list(result.stages)
    assert not sequence_folders(store).exists()  # every sequence stored: no state kept
    (status,) = study_status(store)
    assert (status.planned, status.done, status.stages, status.stages_done) == (2, 2, 6, 6)
    assert set(status.methods) == {
        "houlsby(hidden_size=8) · sequential",
        "houlsby(hidden_size=8) · replay(rate=0.5)",
    }
    with one_thread():
        again = run_study(spec, executor=LocalExecutor(progress=False))
    assert again.outcomes == [] and again.done_before == 2


def test_a_sequence_resumes_after_its_last_stored_stage(model_dir: str, tmp_path: Path) -> None:
    stages = write_stages(tmp_path)
    spec = write_sequence_spec(tmp_path, model_dir, stages, strategies=["sequential"])
    store = tmp_path / "cl.db"
    with one_thread():
        run_study(spec, executor=LocalExecutor(progress=False))
    with ResultStore(store, create=False) as results:
        (stored,) = results.sequences()
        before = results.stages(stored.run_id)
    # Make the store look as a study killed during stage 3 leaves it: the sequence running,
    # two stages stored, the state after stage 2 in the sequence's folder.
    folder = sequence_folders(store) / stored.run_id

    def stop(index: int, outcome: StageOutcome) -> None:
        if index == 1:
            raise KeyboardInterrupt

    with one_thread(), pytest.raises(KeyboardInterrupt):
        run_sequence(stored.result.spec, progress=False, checkpoint=folder, on_stage=stop)
    kept = [
        outcome.record for outcome in SequenceCheckpoint.open(folder, stored.result.spec).completed
    ]
    with sqlite3.connect(store) as db:
        db.execute("UPDATE runs SET status = 'running', record = NULL")
        db.execute("DELETE FROM stages WHERE stage = 2")
    with one_thread():
        summary = run_study(spec, executor=LocalExecutor(progress=False))
    (outcome,) = summary.outcomes
    assert outcome.result is not None
    with ResultStore(store, create=False) as results:
        after = results.stages(stored.run_id)
    assert [when for _, when in after[:2]] == [when for _, when in before[:2]]
    assert after[2][1] > before[2][1]  # only the third stage trained again
    assert list(outcome.result.stages[:2]) == kept
    assert outcome.result.matrix == stored.result.matrix


def test_a_sequence_that_fails_is_stored_failed_and_the_study_goes_on(
    model_dir: str, tmp_path: Path
) -> None:
    stages = write_stages(tmp_path)
    (tmp_path / "empty.csv").write_text("text,label\n")
    spec = write_sequence_spec(
        tmp_path, model_dir, [*stages[:1], str(tmp_path / "empty.csv")], strategies=["replay"]
    )
    with one_thread():
        summary = run_study(spec, executor=LocalExecutor(progress=False))
    (failed,) = summary.failed
    assert failed.error and "empty.csv" in failed.error
    (status,) = study_status(tmp_path / "cl.db")
    assert status.failed == 1 and status.errors[0].startswith("houlsby(hidden_size=8) · replay")


def test_a_sequence_whose_folder_holds_no_state_fails_and_the_study_goes_on(
    model_dir: str, tmp_path: Path
) -> None:
    stages = write_stages(tmp_path)
    spec = write_sequence_spec(tmp_path, model_dir, stages)
    store = tmp_path / "cl.db"
    sequential, replay = plan_sequences(load_spec(spec), tmp_path)
    folder = sequence_folders(store) / sequential.run_id
    folder.parent.mkdir()
    folder.write_text("no state")
    with one_thread():
        summary = run_study(spec, executor=LocalExecutor(progress=False))
    (failed,) = summary.failed
    assert failed.run.run_id == sequential.run_id
    assert failed.error == f"the checkpoint folder {folder} is a file or a link; give a folder"
    assert [s.run_id for s in load_sequences(store)] == [replay.run_id]
    (status,) = study_status(store)
    assert (status.done, status.failed) == (1, 1)
    assert folder.read_text() == "no state"  # left for the user to look at


def test_the_example_study_plans_twelve_sequences() -> None:
    examples = Path(__file__).resolve().parents[1] / "examples"
    spec = load_spec(examples / "continual-task-incremental.yaml")
    runs = plan_sequences(spec, examples)
    assert len(runs) == 12 and {run.spec.train_size for run in runs} == {1000}
    assert [run.label for run in runs[:4]] == [
        "houlsby · sequential",
        "houlsby · replay",
        "houlsby · kd-logit",
        "houlsby · adapter-per-stage",
    ]
    assert runs[0].spec.stages == (
        "reuters-r8",
        "20newsgroups",
        "twitter-sentiment",
        "rotten-tomatoes",
    )
    assert all(run.spec.single_stage and run.spec.test_size == 1000 for run in runs)
