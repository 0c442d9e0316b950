"""Preference runs (`dpo`, `simpo`, `orpo`) end to end on a tiny decoder: the reference read
with the trained adapter off equals a separate frozen copy of the base, and with `--stack` the
stacked adapter alone; the precomputed reference equals the one computed at each step; a run
learns an easy preference and records its pair metrics; and options a task does not read are
refused in one line."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

import pytest
import torch
from cli_cases import killed_at_checkpoint, refused, run_cli, unchanged
from generative_helpers import tiny_decoder, write_pairs, write_preferences

from adaptlab.cli.app import main
from adaptlab.data.preference import Preference
from adaptlab.data.preference_encoding import PreferenceEncoder
from adaptlab.engine.reference import reference_composition, reference_model
from adaptlab.methods.adapt import active, adapt, set_active
from adaptlab.methods.blocks import Stack
from adaptlab.models.loading import load_model
from adaptlab.records.config import TrainConfig
from adaptlab.records.spec import RunSpec
from adaptlab.runs.preference_objective import PreferenceLm, collate_pairs, pair_logps
from adaptlab.runs.preparers import prepare_run
from adaptlab.tasks.registry import get_task

TRAIN = [
    "--method", "lora", "--epochs", "3", "--batch-size", "8", "--learning-rate", "5e-3",
    "--max-length", "32", "--max-new-tokens", "2", "--device", "cpu", "--no-progress",
]  # fmt: skip


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("preference")
    tiny_decoder(folder)
    write_preferences(folder / "pairs.jsonl")
    write_pairs(folder / "sums.jsonl", 60)
    return folder


def encoded_batch(folder: Path) -> tuple[torch.nn.Module, dict[str, torch.Tensor]]:
    loaded = load_model(str(folder / "tiny-decoder"), "causal_lm", seed=0)
    encoder = PreferenceEncoder(loaded.tokenizer, 32)
    pairs = [encoder.pair(Preference(f"is {i} a number ?", " yes", f" no {i}")) for i in range(4)]
    assert all(pair is not None for pair in pairs)
    batch = collate_pairs([p for p in pairs if p is not None], loaded.tokenizer.pad_token_id)
    return loaded.model, batch


def test_the_reference_with_the_adapter_off_is_the_base(inputs: Path) -> None:
    model, batch = encoded_batch(inputs)
    base = copy.deepcopy(model).eval()
    adapt(model, "lora", seed=0)
    with torch.no_grad():  # a trained adapter: its B factor moved off zero
        for name, tensor in model.named_parameters():
            if "lora" in name.lower():
                tensor.add_(0.05)
    model.eval()
    with torch.no_grad():
        policy = pair_logps(model, batch)
        with reference_model(model) as reference:
            off = pair_logps(reference, batch)
        separate = pair_logps(base, batch)
    torch.testing.assert_close(off.chosen, separate.chosen, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(off.rejected, separate.rejected, atol=1e-5, rtol=1e-5)
    assert (policy.chosen - separate.chosen).abs().max() > 1e-3  # the adapter does change it


@pytest.fixture(scope="module")
def dpo_run(inputs: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A DPO run on the easy pairs (beta 0.5)."""
    out = tmp_path_factory.mktemp("dpo-run") / "dpo"
    args = ["train", "--model", str(inputs / "tiny-decoder"), "--data", str(inputs / "pairs.jsonl")]
    with pytest.raises(SystemExit) as done:
        main([*args, "--task", "dpo", "--beta", "0.5", *TRAIN, "--out", str(out)])
    assert done.value.code in (0, None)
    return out


def test_a_dpo_run_learns_an_easy_preference(dpo_run: Path) -> None:
    metrics = json.loads((dpo_run / "metrics.json").read_text())
    test = metrics["test"]
    assert test["reward_accuracy"] == 1.0  # at the start every reward is 0: no pair is right
    assert test["reward_margin"] > 0
    assert test["chosen_logps"] > test["rejected_logps"]
    assert {"exact_match", "perplexity"} <= set(test)
    assert metrics["metric"] == "reward_accuracy"
    assert all("reward_accuracy" in epoch["dev_metrics"] for epoch in metrics["epochs"])


def test_a_dpo_adapter_serves_completions(inputs: Path, dpo_run: Path, tmp_path: Path) -> None:
    pytest.importorskip("fastapi")
    httpx = pytest.importorskip("httpx")
    from serve_helpers import running

    from adaptlab.serve import AdapterService, ServeOptions, create_app

    registry = tmp_path / "registry"
    registry.mkdir()
    shutil.copytree(dpo_run / "adapter", registry / "dpo")
    options = ServeOptions(model=str(inputs / "tiny-decoder"), adapters=str(registry))
    service = AdapterService(options)
    try:
        with running(create_app(service)) as url:
            body = {"model": "dpo", "prompt": "is 3 a number ?", "max_tokens": 2, "temperature": 0}
            answer = httpx.post(f"{url}/v1/completions", json=body, timeout=60)
    finally:
        service.close()
    assert answer.status_code == 200, answer.text
    assert answer.json()["choices"][0]["text"]


@pytest.mark.parametrize("task", ["simpo", "orpo"])
def test_reference_free_runs_learn_an_easy_preference(
    task: str, inputs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / task
    args = ["train", "--model", str(inputs / "tiny-decoder"), "--data", str(inputs / "pairs.jsonl")]
    code, _, err = run_cli([*args, "--task", task, *TRAIN, "--out", str(out)], capsys)
    assert code == 0, err
    test = json.loads((out / "metrics.json").read_text())["test"]
    assert test["reward_accuracy"] == 1.0


@pytest.mark.parametrize(
    ("task", "option", "needle"),
    [
        ("simpo", ["--loss", "ipo"], "--loss"),
        ("orpo", ["--precompute-reference"], "--precompute-reference"),
        ("sft", ["--beta", "0.1"], "--beta"),
        ("dpo", ["--simpo-gamma", "1"], "--simpo-gamma"),
        ("dpo", ["--undesirable-weight", "2"], "--undesirable-weight"),
        ("dpo", ["--loss", "square"], "loss"),
        ("dpo", ["--beta", "0"], "beta must be above 0"),
        ("simpo", ["--simpo-gamma", "-1"], "simpo_gamma must be at least 0"),
    ],
)
def test_an_option_the_task_does_not_read_or_a_bad_value_is_refused(
    task: str,
    option: list[str],
    needle: str,
    inputs: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    data = inputs / ("sums.jsonl" if task == "sft" else "pairs.jsonl")
    args = ["train", "--model", str(inputs / "tiny-decoder"), "--data", str(data)]
    with unchanged(tmp_path):
        refused(
            [*args, "--task", task, *option, *TRAIN, "--out", str(tmp_path / "x")], capsys, needle
        )


def test_dpo_on_an_sft_adapter_takes_it_as_the_reference(
    inputs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = str(inputs / "tiny-decoder")
    sft = tmp_path / "sft"
    code, _, err = run_cli(
        ["train", "--model", model, "--data", str(inputs / "sums.jsonl"), "--task", "sft",
         *TRAIN, "--epochs", "1", "--out", str(sft)],
        capsys,
    )  # fmt: skip
    assert code == 0, err
    spec = RunSpec.build(
        model,
        str(inputs / "pairs.jsonl"),
        "lora",
        train=TrainConfig(epochs=1, batch_size=8, learning_rate=5e-3, max_length=32, seed=0),
        data_options={"task": "dpo", "max_new_tokens": 2},
        device="cpu",
        stack=(str(sft),),
    )
    run = prepare_run(get_task("dpo"), spec, torch.device("cpu"))
    assert isinstance(run, PreferenceLm)
    stacked = active(run.model)
    assert isinstance(stacked, Stack) and reference_composition(stacked) == stacked.children[0]
    batch = collate_pairs(run.train_pairs[:4], run.pad_id)
    with torch.no_grad():  # the new adapter moves off zero, so the policy differs
        for tensor in run.handle.tensors().values():
            tensor.add_(0.05)
    run.model.eval()
    with torch.no_grad():
        policy = pair_logps(run.model, batch)
        with reference_model(run.model) as reference:
            under = pair_logps(reference, batch)
        set_active(run.model, stacked.children[0])
        alone = pair_logps(run.model, batch)
        set_active(run.model, None)
        base = pair_logps(run.model, batch)
    torch.testing.assert_close(under.chosen, alone.chosen, atol=1e-5, rtol=1e-5)
    assert (under.chosen - base.chosen).abs().max() > 1e-4  # the SFT adapter does count
    assert (policy.chosen - under.chosen).abs().max() > 1e-4


def test_the_precomputed_reference_equals_the_one_read_at_each_step(inputs: Path) -> None:
    def first_loss(precompute: bool) -> torch.Tensor:
        options = {"task": "dpo", "max_new_tokens": 2, "precompute_reference": precompute}
        spec = RunSpec.build(
            str(inputs / "tiny-decoder"),
            str(inputs / "pairs.jsonl"),
            "lora",
            train=TrainConfig(epochs=1, batch_size=8, learning_rate=5e-3, max_length=32, seed=0),
            data_options=options,
            device="cpu",
        )
        run = prepare_run(get_task("dpo"), spec, torch.device("cpu"))
        with torch.no_grad():
            for tensor in run.handle.tensors().values():
                tensor.add_(0.02)
        return run.loss(run.batch([0, 3, 5, 7], torch.Generator())).detach()

    torch.testing.assert_close(first_loss(True), first_loss(False), atol=1e-5, rtol=1e-5)


def test_a_kto_run_learns_unpaired_judgements(
    inputs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = [
        {
            "prompt": f"is {i} a number ?",
            "completion": " yes" if i % 2 else " no",
            "label": i % 2 == 1,
        }
        for i in range(80)
    ]
    data = tmp_path / "judged.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in rows))
    out = tmp_path / "kto"
    args = ["train", "--model", str(inputs / "tiny-decoder"), "--data", str(data), "--task", "kto"]
    weights = ["--desirable-weight", "1.2"]
    code, _, err = run_cli([*args, "--beta", "0.5", *weights, *TRAIN, "--out", str(out)], capsys)
    assert code == 0, err
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["spec"]["data_options"]["desirable_weight"] == 1.2
    assert metrics["metric"] == "reward_margin"
    assert metrics["test"]["reward_margin"] > 0  # desirable answers rewarded above the others
    assert metrics["test"]["kl"] >= 0


def test_kto_needs_two_answers_a_batch(
    inputs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "judged.jsonl"
    rows = [{"prompt": f"q {i}", "completion": " yes", "label": bool(i % 2)} for i in range(30)]
    data.write_text("".join(json.dumps(row) + "\n" for row in rows))
    args = ["train", "--model", str(inputs / "tiny-decoder"), "--data", str(data), "--task", "kto"]
    with unchanged(tmp_path):
        refused(
            [*args, *TRAIN, "--batch-size", "1", "--out", str(tmp_path / "x")],
            capsys,
            "--batch-size 2",
        )


def test_eval_scores_a_dpo_adapter_as_its_run_tested_it(
    inputs: Path, dpo_run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without --beta the run's own beta (0.5, from its metrics.json) scores the rewards; a
    given --beta wins, and the margin, beta times the log-ratio, scales with it."""
    args = [
        "eval", "--adapter", str(dpo_run), "--data", str(inputs / "pairs.jsonl"),
        "--model", str(inputs / "tiny-decoder"), "--max-length", "32", "--json",
    ]  # fmt: skip
    code, out, err = run_cli(args, capsys)
    assert code == 0, err
    scores = json.loads(out)
    tested = json.loads((dpo_run / "metrics.json").read_text())["test"]
    for metric in ("reward_accuracy", "reward_margin", "chosen_logps"):
        assert scores[metric] == pytest.approx(tested[metric], abs=1e-4)
    code, out, err = run_cli([*args, "--beta", "0.05"], capsys)
    assert code == 0, err
    assert json.loads(out)["reward_margin"] == pytest.approx(scores["reward_margin"] / 10, rel=1e-4)


def test_a_killed_dpo_run_resumes_to_the_scores_of_an_unbroken_one(
    inputs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = [
        "train", "--model", str(inputs / "tiny-decoder"), "--data", str(inputs / "pairs.jsonl"),
        "--task", "dpo", "--precompute-reference", *TRAIN, "--epochs", "4", "--batch-size", "4",
    ]  # fmt: skip
    unbroken, resumed = tmp_path / "unbroken", tmp_path / "resumed"
    assert run_cli([*args, "--out", str(unbroken)], capsys)[0] == 0
    killed_at_checkpoint(args, resumed, 15)
    code, _, err = run_cli([*args, "--out", str(resumed), "--resume"], capsys)
    assert code == 0, err
    first, second = (json.loads((r / "metrics.json").read_text()) for r in (unbroken, resumed))
    assert second["best_epoch"] == first["best_epoch"]
    assert second["test_loss"] == pytest.approx(first["test_loss"], rel=1e-5, abs=1e-6)
    for a, b in zip(first["epochs"], second["epochs"], strict=True):
        assert b["dev_loss"] == pytest.approx(a["dev_loss"], rel=1e-5, abs=1e-6)


def test_data_pairs_rejects_the_models_own_wrong_answers(
    inputs: Path, dpo_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every wrong answer becomes a pair (the reference chosen, the answer rejected); with those
    very answers as the references, greedy decoding answers every question right: no pair (one
    question a batch: the same computation both times)."""
    questions = tmp_path / "questions.jsonl"
    rows = [{"prompt": f"is {i} a number ?", "answer": "seventeen and three"} for i in range(40)]
    questions.write_text("".join(json.dumps(row) + "\n" for row in rows))
    out = tmp_path / "new folder" / "own.jsonl"  # made as the file is written
    args = [
        "data", "pairs", "--adapter", str(dpo_run), "--model", str(inputs / "tiny-decoder"),
        "--max-new-tokens", "2", "--max-length", "32", "--batch-size", "1", "--device", "cpu",
    ]  # fmt: skip
    code, printed, err = run_cli([*args, "--data", str(questions), "--out", str(out)], capsys)
    assert code == 0, err
    pairs = [json.loads(line) for line in out.read_text().splitlines()]
    asked = {row["prompt"] for row in rows}
    assert pairs and f"{len(pairs)} of " in printed
    for pair in pairs:
        assert pair["prompt"] in asked
        assert pair["chosen"] == " seventeen and three"
        assert pair["rejected"].strip() and pair["rejected"] != pair["chosen"]
    answered = tmp_path / "answered.jsonl"
    answers = [{"prompt": p["prompt"], "answer": p["rejected"]} for p in pairs]
    answered.write_text("".join(json.dumps(row) + "\n" for row in answers * 3))
    again = tmp_path / "again.jsonl"
    code, printed, err = run_cli([*args, "--data", str(answered), "--out", str(again)], capsys)
    assert code == 0, err
    assert again.read_text() == "" and printed.startswith("0 of ")


def test_data_pairs_refuses_questions_without_answers_and_an_existing_file(
    dpo_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    questions = tmp_path / "questions.jsonl"
    questions.write_text("".join(json.dumps({"prompt": f"q {i}"}) + "\n" for i in range(30)))
    out = tmp_path / "own.jsonl"
    args = ["data", "pairs", "--adapter", str(dpo_run), "--data", str(questions)]
    with unchanged(tmp_path):
        refused([*args, "--out", str(out)], capsys, "without a reference answer")
    out.write_text("kept\n")
    with unchanged(tmp_path):
        refused([*args, "--out", str(out)], capsys, "is not an earlier pairs file")


def test_eval_refuses_a_damaged_recorded_beta_naming_the_run_file(
    inputs: Path, dpo_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    shutil.copytree(dpo_run, run)
    record = json.loads((run / "metrics.json").read_text())
    record["spec"]["data_options"]["beta"] = -1
    (run / "metrics.json").write_text(json.dumps(record))
    args = [
        "eval", "--adapter", str(run), "--data", str(inputs / "pairs.jsonl"),
        "--model", str(inputs / "tiny-decoder"), "--max-length", "32",
    ]  # fmt: skip
    with unchanged(tmp_path):
        refused(args, capsys, f"{run / 'metrics.json'}: beta must be above 0")


def test_data_pairs_refuses_an_adapter_that_writes_no_answers(
    trained: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    questions = tmp_path / "questions.jsonl"
    questions.write_text(
        "".join(json.dumps({"prompt": f"q {i}", "answer": "a"}) + "\n" for i in range(30))
    )
    args = ["data", "pairs", "--adapter", str(trained), "--data", str(questions)]
    with unchanged(tmp_path):
        refused([*args, "--out", str(tmp_path / "own.jsonl")], capsys, "does not write answers")
