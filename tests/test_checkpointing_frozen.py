"""`--gradient-checkpointing` where part of the model runs without dropout (a frozen front, a
Mixout model): training ends with the weights and losses of training without it, and a frozen
front builds no graph for the backward pass."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from cli_cases import run_cli, write_reviews
from safetensors.torch import load_file
from tiny_models import save_tiny_bert, tiny_inputs, tiny_model

import adaptlab
from adaptlab.engine.checkpointing import enable_checkpointing

METHODS = {
    "head": ["--method", "head"],
    "head-uncached": ["--method", "head", "--frozen-cache", "off"],
    "freeze": ["--method", "freeze", "-o", "k=1"],
    "freeze-uncached": ["--method", "freeze", "-o", "k=1", "--frozen-cache", "off"],
    "lora": ["--method", "lora"],
    "mixout": ["--method", "full", "-o", "mixout=0.1"],
}


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("checkpointing")
    return {
        "root": root,
        "model": Path(save_tiny_bert(str(root / "tiny-bert"))),  # dropout on
        "reviews": write_reviews(root / "reviews.csv", rows=40),
    }


@pytest.mark.parametrize("method", sorted(METHODS))
def test_checkpointed_training_ends_where_plain_training_does(
    setup: dict[str, Path], method: str, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = {}
    for kind, extra in (("plain", []), ("checkpointed", ["--gradient-checkpointing"])):
        out = setup["root"] / f"{method}-{kind}"
        args = [
            "train", "--model", str(setup["model"]), "--data", str(setup["reviews"]),
            *METHODS[method], "--epochs", "2", "--batch-size", "8", "--learning-rate", "1e-3",
            "--device", "cpu", "--out", str(out), "--no-progress", *extra,
        ]  # fmt: skip
        code, _, err = run_cli(args, capsys)
        assert code == 0, err
        runs[kind] = out
    plain, checkpointed = (
        load_file(str(runs[k] / "adapter" / "adapter.safetensors"))
        for k in ("plain", "checkpointed")
    )
    assert plain.keys() == checkpointed.keys() and plain
    for name, tensor in plain.items():
        torch.testing.assert_close(checkpointed[name], tensor, rtol=1e-4, atol=1e-6, msg=name)
    first, second = (json.loads((runs[k] / "metrics.json").read_text()) for k in runs)
    for a, b in zip(first["epochs"], second["epochs"], strict=True):
        assert b["train_loss"] == pytest.approx(a["train_loss"], rel=1e-4)
        assert b["dev_loss"] == pytest.approx(a["dev_loss"], rel=1e-4)


def test_a_frozen_front_builds_no_graph_under_checkpointing() -> None:
    model = tiny_model("bert", seed=0)
    adaptlab.adapt(model, {"freeze": {"k": 1}}, seed=1)
    enable_checkpointing(model)
    model.train()
    hidden = model(**tiny_inputs(), output_hidden_states=True).hidden_states
    assert not hidden[0].requires_grad and not hidden[1].requires_grad  # embeddings, block 0
    assert hidden[2].requires_grad  # block 1 trains
