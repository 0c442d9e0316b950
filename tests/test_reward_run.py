"""Reward-model runs (`--task reward`) end to end on a tiny decoder and a tiny encoder: texts are
tokenised and batched as TRL's `RewardTrainer` does, the loss (with the centring term) is its
loss on the model's scores, a run learns an easy preference from near chance, every kind of
method trains the score with its head, an option the task does not read (or a bad value) is
refused in one line with nothing written, and the trained adapter, served or asked by
`adaptlab predict`, scores each text as training scored it."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from cli_cases import refused, run_cli, unchanged
from generative_helpers import tiny_decoder, write_preferences
from tiny_models import save_tiny_bert

import adaptlab
from adaptlab.cli.app import main
from adaptlab.data.generative import Turn
from adaptlab.data.preference import Preference
from adaptlab.data.reward_encoding import RewardEncoder
from adaptlab.models.loading import load_model, load_tokenizer
from adaptlab.records.config import TrainConfig
from adaptlab.records.spec import RunSpec
from adaptlab.runs.preparers import prepare_run
from adaptlab.runs.reward_objective import collate_pairs, pair_scores
from adaptlab.runs.reward_run import RewardRun
from adaptlab.runs.run import execute
from adaptlab.tasks.registry import get_task

MODELS = ("tiny-decoder", "tiny-bert")
TRAIN = [
    "--method", "lora", "--epochs", "3", "--batch-size", "8", "--learning-rate", "1e-2",
    "--max-length", "32", "--device", "cpu", "--no-progress",
]  # fmt: skip
PROMPTS = ["is 7 a number ?", "is 123 a number ?", "is 45 a number ?"]


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny decoder (its EOS [SEP] is not its padding [PAD]), a tiny BERT and the pairs."""
    folder = tmp_path_factory.mktemp("reward")
    tiny_decoder(folder)
    save_tiny_bert(str(folder / "tiny-bert"))
    write_preferences(folder / "pairs.jsonl")
    return folder


@pytest.fixture(scope="module")
def runs(inputs: Path) -> dict[str, Path]:
    """A reward run of each model, trained by `adaptlab train --task reward`."""
    folders = {}
    for model in MODELS:
        out = inputs / f"run-{model}"
        args = ["train", "--model", str(inputs / model), "--data", str(inputs / "pairs.jsonl")]
        with pytest.raises(SystemExit) as done:
            main([*args, "--task", "reward", *TRAIN, "--out", str(out)])
            raise SystemExit(0)
        assert done.value.code in (0, None)
        folders[model] = out
    return folders


def reward_run(inputs: Path, model: str, **options: Any) -> RewardRun:
    spec = RunSpec.build(
        str(inputs / model),
        str(inputs / "pairs.jsonl"),
        "lora",
        train=TrainConfig(epochs=1, batch_size=8, learning_rate=1e-2, max_length=32, seed=0),
        data_options={"task": "reward", **options},
        device="cpu",
    )
    run = prepare_run(get_task("reward"), spec, torch.device("cpu"))
    assert isinstance(run, RewardRun)
    return run


def test_texts_are_tokenised_and_batched_as_trl_s_reward_trainer_does(inputs: Path) -> None:
    datasets = pytest.importorskip("datasets")
    trl = pytest.importorskip("trl")
    tokenizer = load_tokenizer(str(inputs / "tiny-decoder"))
    assert tokenizer.eos_token != tokenizer.pad_token  # the EOS appended is a token scored
    config = trl.RewardConfig(
        output_dir=str(inputs / "trl"), max_length=64, report_to=[], use_cpu=True, bf16=False
    )
    texts = {
        "prompt": ["is 3 a number ?", "hi"],
        "chosen": [" yes", " hello"],
        "rejected": [" no", " go"],
    }
    user = [{"role": "user", "content": "is 3 a number ?"}]
    chat = {
        "prompt": [user],
        "chosen": [[{"role": "assistant", "content": "yes"}]],
        "rejected": [[{"role": "assistant", "content": "no"}]],
    }
    encoder = RewardEncoder(tokenizer, 64)
    pairs = []
    ours = {
        "texts": [Preference(*row) for row in zip(*texts.values(), strict=True)],
        "chat": [Preference((Turn("user", "is 3 a number ?"),), "yes", "no")],
    }
    for rows, examples in ((texts, ours["texts"]), (chat, ours["chat"])):
        prepared = trl.RewardTrainer._prepare_dataset(
            None, datasets.Dataset.from_dict(rows), tokenizer, config, "train"
        )
        for row, example in enumerate(examples):
            pair = encoder.pair(example)
            assert pair is not None
            assert list(pair.chosen) == prepared[row]["chosen_ids"]
            assert list(pair.rejected) == prepared[row]["rejected_ids"]
            pairs.append(pair)
    assert pairs[0].chosen[-1] == tokenizer.eos_token_id  # a text answer ends with EOS
    batch = collate_pairs(pairs, tokenizer.pad_token_id)
    theirs = trl.trainer.reward_trainer.DataCollatorForPreference(tokenizer.pad_token_id)(
        [{"chosen_ids": list(p.chosen), "rejected_ids": list(p.rejected)} for p in pairs]
    )
    ids, mask = batch["input_ids"], batch["attention_mask"]
    assert torch.equal(torch.cat([ids[:, 0], ids[:, 1]]), theirs["input_ids"])
    assert torch.equal(torch.cat([mask[:, 0], mask[:, 1]]), theirs["attention_mask"])
    assert RewardEncoder(tokenizer, 8).pair(Preference("a long prompt " * 4, " yes", " no")) is None


def test_the_loss_is_trl_s_on_the_model_s_scores_with_the_centring_term(inputs: Path) -> None:
    run = reward_run(inputs, "tiny-decoder", center_rewards_coefficient=0.5)
    with torch.no_grad():  # scores away from 0, so the centring term counts
        for tensor in run.handle.tensors().values():
            tensor.add_(0.05)
    indices = [0, 3, 5, 7]
    batch = run.batch(indices, torch.Generator())
    ids, mask = batch["input_ids"], batch["attention_mask"]
    rows = torch.cat([ids[:, 0], ids[:, 1]]), torch.cat([mask[:, 0], mask[:, 1]])
    logits = run.model(input_ids=rows[0], attention_mask=rows[1]).logits
    chosen, rejected = torch.chunk(logits.squeeze(-1), chunks=2)  # TRL's compute_loss
    centring = 0.5 * torch.mean((chosen + rejected) ** 2)
    expected = -F.logsigmoid(chosen - rejected).mean() + centring
    assert centring > 1e-3
    torch.testing.assert_close(run.loss(batch), expected, atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("model", MODELS)
def test_a_reward_run_learns_an_easy_preference(
    model: str, inputs: Path, runs: dict[str, Path]
) -> None:
    start = reward_run(inputs, model)
    untrained = start.score(start.encoded.splits["test"])
    assert abs(untrained.loss - math.log(2)) < 0.02  # a fresh head: about a coin's loss
    assert abs(untrained.metrics["reward_margin"]) < 0.05
    result = json.loads((runs[model] / "metrics.json").read_text())
    test, loss = result["test"], result["test_loss"]
    assert result["metric"] == "pairwise_accuracy" and result["data"]["task"] == "reward"
    assert test["pairwise_accuracy"] == 1.0
    assert test["reward_margin"] > 0.5
    assert test["chosen_score"] - test["rejected_score"] == pytest.approx(test["reward_margin"])
    assert loss < 0.5
    # the mean Bradley-Terry loss is at least that of the mean margin (the loss is convex)
    assert loss >= math.log1p(math.exp(-test["reward_margin"])) - 1e-6
    dev = [epoch["dev_metrics"]["reward_margin"] for epoch in result["epochs"]]
    assert dev[-1] > dev[0]
    manifest = json.loads((runs[model] / "adapter" / "manifest.json").read_text())
    assert manifest["task"] == "reward" and manifest["train_head"] is True


@pytest.mark.parametrize("method", ["houlsby", "bitfit", "full"])
def test_every_kind_of_method_trains_the_score_with_its_head(method: str, inputs: Path) -> None:
    spec = RunSpec.build(
        str(inputs / "tiny-bert"),
        str(inputs / "pairs.jsonl"),
        method,
        train=TrainConfig(epochs=2, batch_size=8, learning_rate=1e-2, max_length=32, seed=0),
        data_options={"task": "reward"},
        device="cpu",
    )
    result = execute(spec, progress=False)
    if method != "full":  # which trains every parameter, the head's among them
        assert result.parameter_groups["head"] > 0  # the head of one output trains beside it
    assert result.test_loss is not None and result.test_loss < math.log(2) - 1e-3
    assert result.test["reward_margin"] > 0


@pytest.mark.parametrize(
    ("task", "option", "needle"),
    [
        ("reward", ["--beta", "0.1"], "--beta"),
        ("reward", ["--max-new-tokens", "2"], "--max-new-tokens"),
        ("dpo", ["--center-rewards-coefficient", "0.01"], "--center-rewards-coefficient"),
        ("reward", ["--center-rewards-coefficient", "-1"], "center_rewards_coefficient"),
    ],
)
def test_an_option_a_run_does_not_read_or_a_bad_value_is_refused(
    task: str,
    option: list[str],
    needle: str,
    inputs: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = ["train", "--model", str(inputs / "tiny-decoder"), "--data", str(inputs / "pairs.jsonl")]
    with unchanged(tmp_path):
        refused(
            [*args, "--task", task, *option, *TRAIN, "--out", str(tmp_path / "x")], capsys, needle
        )


def training_scores(inputs: Path, model: str, adapter: Path) -> list[tuple[float, float]]:
    """Each prompt's chosen and rejected scores as training reads them: its encoding and
    batching, the adapter loaded on a fresh base."""
    loaded = load_model(str(inputs / model), "regression", seed=0)
    adaptlab.load_adapter(loaded.model, adapter)
    loaded.model.eval()
    encoder = RewardEncoder(loaded.tokenizer, 32)
    pairs = [encoder.pair(Preference(prompt, " yes", " no")) for prompt in PROMPTS]
    batch = collate_pairs(
        [pair for pair in pairs if pair is not None], loaded.tokenizer.pad_token_id
    )
    with torch.no_grad():
        scores = pair_scores(loaded.model, batch)
    return list(zip(scores.chosen.tolist(), scores.rejected.tolist(), strict=True))


@pytest.mark.parametrize("model", MODELS)
def test_a_served_reward_adapter_scores_each_text_as_training_did(
    model: str, inputs: Path, runs: dict[str, Path], tmp_path: Path
) -> None:
    # no capsys here: a logging handler made under another stream (absl's) closes that
    # stream when uvicorn reconfigures logging, unless it is sys.stderr at the time
    pytest.importorskip("fastapi")
    pytest.importorskip("uvicorn")
    httpx = pytest.importorskip("httpx")
    from serve_helpers import running

    from adaptlab.serve import AdapterService, ServeOptions, create_app

    registry = tmp_path / "registry"
    registry.mkdir()
    shutil.copytree(runs[model], registry / "judge")
    texts = [f"{prompt}{answer}" for prompt in PROMPTS for answer in (" yes", " no")]
    service = AdapterService(ServeOptions(model=str(inputs / model), adapters=str(registry)))
    try:
        with running(create_app(service)) as url:
            listed = httpx.get(f"{url}/adapters", timeout=60).json()
            response = httpx.post(
                f"{url}/predict", json={"adapter": "judge", "texts": texts}, timeout=60
            )
    finally:
        service.close()
    assert [entry["task"] for entry in listed["adapters"]] == ["reward"], listed["refused"]
    assert response.status_code == 200, response.text
    served = response.json()["predictions"]
    assert [set(p) for p in served] == [{"text", "score"}] * len(texts)
    assert [p["text"] for p in served] == texts
    expected = training_scores(inputs, model, runs[model] / "adapter")
    for row, (chosen, rejected) in enumerate(expected):
        assert served[2 * row]["score"] > served[2 * row + 1]["score"]
        assert served[2 * row]["score"] == pytest.approx(chosen, abs=1e-4)
        assert served[2 * row + 1]["score"] == pytest.approx(rejected, abs=1e-4)


def test_adaptlab_predict_prints_each_text_s_score(
    inputs: Path, runs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = "tiny-decoder"
    texts = [f"{prompt}{answer}" for prompt in PROMPTS for answer in (" yes", " no")]
    lines = tmp_path / "texts.txt"
    lines.write_text("\n".join(texts) + "\n")
    args = ["predict", "--adapter", str(runs[model]), "--model", str(inputs / model)]
    code, out, err = run_cli([*args, "--input", str(lines)], capsys)
    assert code == 0, err
    printed = [line.split("\t") for line in out.strip().splitlines()]
    assert [text for _, text in printed] == texts
    expected = training_scores(inputs, model, runs[model] / "adapter")
    scores = [score for pair in expected for score in pair]
    assert [float(score) for score, _ in printed] == pytest.approx(scores, abs=1e-3)
    code, out, err = run_cli([*args, "--input", str(lines), "--jsonl"], capsys)
    assert code == 0, err
    rows = [json.loads(line) for line in out.strip().splitlines()]
    assert [set(row) for row in rows] == [{"text", "score"}] * len(texts)


@pytest.mark.parametrize("model", MODELS)
def test_eval_scores_a_reward_adapter_as_its_run_tested_it(
    model: str, inputs: Path, runs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    args = [
        "eval", "--adapter", str(runs[model]), "--model", str(inputs / model),
        "--data", str(inputs / "pairs.jsonl"), "--max-length", "32", "--json",
    ]  # fmt: skip
    code, out, err = run_cli(args, capsys)
    assert code == 0, err
    scores = json.loads(out)
    tested = json.loads((runs[model] / "metrics.json").read_text())
    assert scores["loss"] == pytest.approx(tested["test_loss"], abs=1e-4)
    for metric in ("pairwise_accuracy", "reward_margin", "chosen_score"):
        assert scores[metric] == pytest.approx(tested["test"][metric], abs=1e-4)
