"""GRPO's several optimiser steps per generated batch (`--num-iterations`, the paper's mu) and its
upper clipping range (`--epsilon-high`, DAPO's clip-higher): each batch is sampled once and
trained on mu steps in a row, the later ones against the sampling policy's log-probabilities
kept from when it was made, the ratio clipped to [1 - epsilon, 1 + epsilon_high] (Eq. 3, checked
here by hand); a run records both options; a run stopped between batches resumes to the weights
of an unbroken one, and a checkpoint between the steps of one batch is refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from cli_cases import run_cli
from safetensors.torch import load_file
from test_grpo_run import TRAIN, base_run, grpo_inputs

from adaptlab.engine.checkpoint_record import CheckpointRecord, Position, TrainingPlan
from adaptlab.engine.completion_logps import completion_token_log_probs
from adaptlab.engine.preference_loss import grpo_loss
from adaptlab.errors import ConfigError
from adaptlab.records.config import TrainConfig
from adaptlab.records.spec import RunSpec
from adaptlab.runs.run import execute
from adaptlab.tasks.grpo_settings import GrpoSettings
from adaptlab.tasks.verifiable_rewards import register_reward

SAYS_NO = {"reward": "format", "format_pattern": "no.*"}
"""A reward the base model earns now and then, so a batch's advantages are not all 0."""


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return grpo_inputs(tmp_path_factory.mktemp("grpo-iterations"))


def test_a_batch_is_sampled_once_and_trained_on_num_iterations_steps(
    inputs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = [
        "train", "--model", str(inputs / "tiny-words"), "--data", str(inputs / "questions.jsonl"),
        "--task", "grpo", *TRAIN, "--epochs", "2", "--reward", "exact",
        "--num-iterations", "2", "--epsilon-high", "0.28", "--out", str(tmp_path / "run"),
    ]  # fmt: skip
    code, _, err = run_cli(args, capsys)
    assert code == 0, err
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    options = metrics["spec"]["data_options"]
    assert (options["num_iterations"], options["epsilon_high"]) == (2, 0.28)
    assert [epoch["step"] for epoch in metrics["epochs"]] == [26, 52]  # 13 batches, 2 steps each
    log = (tmp_path / "run" / "train.log").read_text()
    sampled = [line.split(" step ")[1].split()[0] for line in log.splitlines() if "sampled" in line]
    assert sampled == [str(step) for step in range(1, 52, 2)]  # a batch at every other step
    first, last = (metrics["epochs"][i]["dev_metrics"]["train_reward"] for i in (0, -1))
    assert last > first


def test_later_steps_on_a_batch_read_the_sampling_policys_log_probs(inputs: Path) -> None:
    run = base_run(inputs, num_iterations=2, epsilon_high=0.28, max_new_tokens=3, **SAYS_NO)
    batch = run.batch([0, 1, 2, 3], torch.Generator().manual_seed(0))
    rows = (batch["input_ids"], batch["attention_mask"], batch["completion_mask"])
    mask, advantages, old = batch["completion_mask"][:, 1:], batch["advantages"], batch["old_logps"]
    with torch.no_grad():
        torch.testing.assert_close(old, completion_token_log_probs(run.model, *rows))
    assert advantages.abs().sum() > 0
    first = run.loss(batch)  # the policy has not moved: the ratio is 1
    torch.testing.assert_close(first, grpo_loss("dapo", old, mask, advantages))
    first.backward()
    with torch.no_grad():  # one step of plain gradient descent, large enough to clip
        for parameter in run.model.parameters():
            if parameter.grad is not None:
                parameter -= 0.5 * parameter.grad
                parameter.grad = None

    logps = completion_token_log_probs(run.model, *rows)
    ratio = torch.exp(logps - old)  # Eq. 3 by hand: -min(r A, clip(r, 1 - 0.2, 1 + 0.28) A)
    gain = advantages[:, None]
    terms = -torch.min(ratio * gain, ratio.clamp(0.8, 1.28) * gain)
    by_hand = (terms * mask).sum() / mask.sum()
    second = run.loss(batch)
    torch.testing.assert_close(second, by_hand)
    trained = [p for p in run.model.parameters() if p.requires_grad]
    for ours, hand in zip(
        torch.autograd.grad(second, trained), torch.autograd.grad(by_hand, trained), strict=True
    ):
        torch.testing.assert_close(ours, hand)
    raised = (ratio > 1.2) & (gain > 0) & mask.bool()
    assert raised.any()  # tokens of positive advantage past 1 + epsilon: clip-higher counts
    symmetric = grpo_loss("dapo", logps, mask, advantages, old_logps=old)
    assert (second - symmetric).abs() > 1e-6
    assert "old_logps" not in base_run(inputs).batch([0], torch.Generator().manual_seed(0))


def test_a_run_stopped_between_batches_resumes_to_the_weights_of_an_unbroken_one(
    inputs: Path, tmp_path: Path
) -> None:
    calls, halt = [0], [32 * 3 + 5]  # inside the 4th batch's sampling (4 prompts x 8 each)

    def says_yes(completion: str, answer: str | None) -> float:
        calls[0] += 1
        if calls[0] == halt[0]:
            raise RuntimeError("stopped")
        return float(completion.strip() == "yes")

    register_reward("test-halting-yes", says_yes)
    spec = RunSpec.build(
        str(inputs / "tiny-words"),
        str(inputs / "questions.jsonl"),
        "lora",
        train=TrainConfig(epochs=1, batch_size=4, learning_rate=2e-2, max_length=16, seed=0),
        data_options={
            "task": "grpo",
            "max_new_tokens": 1,
            "reward": "test-halting-yes",
            "num_iterations": 2,
            "epsilon_high": 0.28,
        },  # fmt: skip
        device="cpu",
    )
    stopped, unbroken = tmp_path / "stopped", tmp_path / "unbroken"
    with pytest.raises(RuntimeError, match="stopped"):
        execute(spec, stopped, progress=False, checkpoint_every=4)
    halt[0] = 0
    execute(spec, stopped, progress=False, resume=True)
    execute(spec, unbroken, progress=False)
    assert "resumed at epoch 1 step 4" in (stopped / "train.log").read_text()
    one, two = (load_file(str(r / "adapter" / "adapter.safetensors")) for r in (unbroken, stopped))
    assert one.keys() == two.keys()
    for name, tensor in one.items():
        torch.testing.assert_close(two[name], tensor, rtol=1e-5, atol=1e-7, msg=name)


def test_a_checkpoint_between_the_steps_of_one_batch_is_refused(tmp_path: Path) -> None:
    plan = TrainingPlan.of(8, TrainConfig(epochs=1, batch_size=4), "reward", updates=2)
    assert plan.per_epoch == 4
    record = CheckpointRecord(
        spec={},
        data_digest=None,
        every=1,
        tensors="tensors-3.safetensors",
        position=Position(epoch=1, done=3, step=3, order=list(range(8)), losses=[0.0] * 3),
        epochs=[],
        best_epoch=0,
        best_score=float("-inf"),
        skipped=0,
        optimizer_groups=[],
        scheduler={},
        scaler={},
    )
    with pytest.raises(ConfigError, match="between the 2 steps taken on one batch"):
        record.check_fits(plan, tmp_path)


def test_the_options_defaults_and_ranges() -> None:
    default = GrpoSettings.of({"task": "grpo"}, "grpo")
    assert (default.epsilon_high, default.num_iterations) == (None, 1)  # TRL's: epsilon, 1
    narrower = GrpoSettings.of({"task": "grpo", "epsilon_high": 0.1, "num_iterations": 3}, "grpo")
    assert (narrower.epsilon_high, narrower.num_iterations) == (0.1, 3)  # below epsilon, as TRL
    for bad in ({"num_iterations": True}, {"num_iterations": 1.5}, {"epsilon_high": "0.3"}):
        with pytest.raises(ConfigError, match=next(iter(bad))):
            GrpoSettings.of({"task": "grpo", **bad}, "grpo")
