"""Sequences end to end on a tiny BERT: heads per stage, each strategy's promise, the matrix."""

from __future__ import annotations

import copy
import csv
import json
import random
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from cli_cases import run_cli
from tiny_models import tiny_model

from adaptlab.continual import (
    SEQUENCE_FILE,
    SequenceSpec,
    StageHeads,
    make_strategy,
    run_sequence,
)
from adaptlab.continual.classification import CLASSIFICATION
from adaptlab.continual.labelled_run import HeadOutputs, StageRun
from adaptlab.continual.labelled_stages import encode_stage
from adaptlab.continual.registry import strategy_config
from adaptlab.continual.stage_loop import train_stage
from adaptlab.errors import ConfigError
from adaptlab.methods import add_adapter, train_adapter
from adaptlab.records.config import TrainConfig

TOPICS = {
    "sentiment": {"fresh": ["great", "lovely", "superb"], "rotten": ["dull", "awful", "bad"]},
    "topic": {
        "sport": ["goal", "match", "team"],
        "politics": ["vote", "law", "party"],
        "science": ["atom", "cell", "theory"],
    },
}


def write_stage(folder: Path, name: str, rows: int = 60) -> str:
    """A learnable CSV whose label decides the words."""
    rng = random.Random(name)
    path = folder / f"{name}.csv"
    labels = list(TOPICS[name])
    with path.open("w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(["text", "label"])
        for i in range(rows):
            label = labels[i % len(labels)]
            words = TOPICS[name][label]
            writer.writerow([f"the {rng.choice(words)} and {rng.choice(words)} here", label])
    return str(path)


def sequence(model: str, stages: tuple[str, ...], strategy: str, **options: object) -> SequenceSpec:
    train = TrainConfig(epochs=2, batch_size=8, learning_rate=5e-3, seed=0)
    return SequenceSpec.build(model, stages, "houlsby", strategy, options, train=train)


def test_heads_per_stage_have_their_label_counts() -> None:
    model = tiny_model("bert", num_labels=2)
    pooler = copy.deepcopy(model.bert.pooler)
    heads = StageHeads.install(model, [2, 3, 5], seed=0)
    inputs = {"input_ids": torch.tensor([[5, 6, 7]]), "attention_mask": torch.ones(1, 3).long()}
    for stage, count in enumerate([2, 3, 5]):
        heads.select(stage)
        assert model(**inputs).logits.shape == (1, count)
    heads.collecting = True
    model(**inputs)
    assert [o.shape[-1] for o in heads.outputs] == [2, 3, 5]
    assert isinstance(model.bert.pooler, torch.nn.Identity)  # each head has its own copy
    for head in heads.heads:
        torch.testing.assert_close(head[0].dense.weight, pooler.dense.weight)
    again = StageHeads.install(tiny_model("bert", num_labels=2), [2, 3, 5], seed=0)
    torch.testing.assert_close(again.heads[2][1].weight, heads.heads[2][1].weight)


def test_adapter_per_stage_keeps_earlier_scores_exactly(
    tiny_model_dir: str, stages: tuple[str, str]
) -> None:
    result = run_sequence(sequence(tiny_model_dir, stages, "adapter-per-stage"), progress=False)
    assert len(result.matrix) == 2 and len(result.tests[1]) == 2
    assert result.tests[1][0] == result.tests[0][0]  # every metric and the loss, to the last bit
    assert result.tests[1][1]["loss"] != result.tests[0][1]["loss"]  # stage 1 did train
    assert result.scores.backward_transfer == 0.0
    assert result.scores.forgetting == (0.0,)


def test_sequential_training_changes_the_first_stage(
    tiny_model_dir: str, stages: tuple[str, str]
) -> None:
    result = run_sequence(sequence(tiny_model_dir, stages, "sequential"), progress=False)
    assert result.tests[1][0]["loss"] != result.tests[0][0]["loss"]  # the shared adapter moved
    assert result.to_dict()["spec"]["strategy"]["name"] == "sequential"


def _stage_run(tiny_model_dir: str, stages: tuple[str, str], index: int) -> StageRun:
    spec = sequence(tiny_model_dir, stages, "sequential")
    from adaptlab.models.loading import load_model

    datasets = [CLASSIFICATION.read_stage(s, {}, spec) for s in stages]
    loaded = load_model(tiny_model_dir, "single_label", label_names=datasets[0].label_names)
    model = loaded.model
    heads = StageHeads.install(model, [len(d.label_names) for d in datasets], 0)
    encoded = [encode_stage(d, loaded.tokenizer, spec) for d in datasets]
    add_adapter(model, "sequence", "houlsby", train_head=False)
    train_adapter(model, "sequence")
    heads.select(index)
    heads.train_only(index)
    return StageRun(model, encoded, index, 16, heads=heads, seed=0)


def test_replay_draws_only_earlier_stages_at_the_asked_rate(
    tiny_model_dir: str, stages: tuple[str, str]
) -> None:
    run = _stage_run(tiny_model_dir, stages, 1)
    replay = make_strategy(strategy_config("replay", {"rate": 0.25}))
    replay.begin(run)
    generator = torch.Generator().manual_seed(0)
    drawn = [replay.replayed(run, 8, generator) for _ in range(10)]  # 80 new examples
    rows = [row for batch in drawn for row in batch]
    assert len(rows) == 20  # 0.25 * 80, exactly
    assert all(len(batch) == 2 for batch in drawn)  # spread evenly
    assert {stage for stage, _ in rows} == {0}
    assert all(0 <= index < len(run.stages[0].train) for _, index in rows)
    first = _stage_run(tiny_model_dir, stages, 0)
    replay.begin(first)
    assert replay.replayed(first, 8, generator) == []  # nothing earlier to replay


def test_replay_rate_below_one_per_batch_still_holds_over_the_stage(
    tiny_model_dir: str, stages: tuple[str, str]
) -> None:
    run = _stage_run(tiny_model_dir, stages, 1)
    replay = make_strategy(strategy_config("replay"))  # 1%
    replay.begin(run)
    generator = torch.Generator().manual_seed(0)
    counts = [len(replay.replayed(run, 16, generator)) for _ in range(50)]  # 800 new
    assert sum(counts) == 8
    assert max(counts) == 1


def test_kd_teacher_is_frozen_and_unchanged_by_training(
    tiny_model_dir: str, stages: tuple[str, str]
) -> None:
    run = _stage_run(tiny_model_dir, stages, 0)
    train_stage(
        run, make_strategy(strategy_config("sequential")), run_config(), 5e-3, progress=False
    )
    run = replace(run, index=1)
    before = head_scores(run, 0)  # stage 0's head on stage 1's examples, before stage 1
    run.heads.select(1)
    run.heads.train_only(1)
    kd = make_strategy(strategy_config("kd-logit"))
    kd.begin(run)
    teacher = kd.teacher  # type: ignore[attr-defined]
    kept = [t.clone() for t in teacher]
    assert len(teacher) == 1 and not teacher[0].requires_grad
    torch.testing.assert_close(teacher[0], before)
    train_stage(run, kd, run_config(), 5e-3, progress=False)
    torch.testing.assert_close(kd.teacher[0], kept[0], rtol=0, atol=0)  # type: ignore[attr-defined]
    assert not torch.allclose(head_scores(run, 0), before)  # the student did move


def head_scores(run: StageRun, head: int) -> torch.Tensor:
    """Head `head`'s scores on the training examples of `run`'s stage, one head selected."""
    run.heads.select(head)
    run.model.eval()
    with torch.no_grad():
        batch = run.stage.encoder.collate(list(run.stage.train))
        batch.pop("labels")
        return run.model(**batch).logits


def test_kd_penalty_pulls_earlier_heads_to_the_teacher(
    tiny_model_dir: str, stages: tuple[str, str]
) -> None:
    run = _stage_run(tiny_model_dir, stages, 1)
    kd = make_strategy(strategy_config("kd-logit", {"weight": 1.0}))
    kd.begin(run)
    rows = [(1, i) for i in range(4)]
    run.model.eval()
    exact = [kd.teacher[0][:4], torch.zeros(4, 3)]  # type: ignore[attr-defined]
    assert kd.penalty(run, rows, HeadOutputs(exact)).item() == pytest.approx(0.0, abs=1e-6)
    shifted = [kd.teacher[0][:4].flip(-1), torch.zeros(4, 3)]  # type: ignore[attr-defined]
    assert kd.penalty(run, rows, HeadOutputs(shifted)).item() > 0


def run_config() -> TrainConfig:
    return TrainConfig(epochs=1, batch_size=8, seed=0)


@pytest.mark.parametrize(
    ("name", "options", "message"),
    [
        ("rehearsal", {}, "unknown strategy 'rehearsal'"),
        ("replay", {"rate": 0}, "rate must be in"),
        ("replay", {"ratio": 0.1}, "unknown option 'ratio'"),
        ("replay", {"rate": "high"}, "rate must be a float"),
        ("kd-logit", {"temperature": -1.0}, "temperature must be > 0"),
    ],
)
def test_bad_strategies_are_refused(name: str, options: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        strategy_config(name, options)


def test_cli_runs_a_sequence_with_distillation(
    tiny_model_dir: str,
    stages: tuple[str, str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = tmp_path / "seq"
    code, printed, err = run_cli(
        [
            "sequence", "--model", tiny_model_dir, "--stages", ",".join(stages),
            "--strategy", "kd-logit", "-s", "temperature=3", "--method", "lora",
            "--epochs", "1", "--batch-size", "8", "--learning-rate", "0.005",
            "--out", str(out), "--no-progress",
        ],
        capsys,
    )  # fmt: skip
    assert code == 0, err
    written = json.loads((out / SEQUENCE_FILE).read_text())
    assert written["spec"]["strategy"] == {
        "name": "kd-logit",
        "config": {"weight": 1.0, "temperature": 3.0},
    }
    assert len(written["matrix"]) == 2 and all(len(row) == 2 for row in written["matrix"])
    assert written["scores"]["backward_transfer"] == pytest.approx(
        written["matrix"][1][0] - written["matrix"][0][0]
    )
    assert "average" in printed and "BWT" in printed and "sentiment" in printed


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--strategy", "rehearsal"], "unknown strategy 'rehearsal'"),
        (["-s", "rate"], "strategy option 'rate' is not KEY=VALUE"),
        (["--strategy", "replay", "-s", "rate=2"], "rate must be in (0, 1]"),
        (["--method", "fusion"], "fusion is not one of its methods"),
    ],
)
def test_cli_refuses_bad_sequences_in_one_line(
    args: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["sequence", "--model", "minilm-l6", "--stages", "a.csv", "--out", str(tmp_path / "o")]
    code, _, err = run_cli([*base, *args], capsys)
    assert code == 1
    assert message in err and "Traceback" not in err
