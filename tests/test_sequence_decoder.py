"""Causal language modelling needs a decoder: `adaptlab sequence --objective causal-lm` and a
study with `objective: causal-lm` refuse an encoder (BERT) in one line naming its architecture,
before any training; the reverse, masked-LM training of a causal-only model, is refused as
well. Nothing is written, inputs unchanged byte for byte."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_cases import refused, unchanged
from test_continual_lm import write_corpus
from tiny_models import save_tiny_bert, save_tiny_llama

ENCODER = "is a BertModel (bert), an encoder that reads text both ways"
NEEDS = "needs a decoder-only causal LM"


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny BERT, a tiny Llama and two corpora."""
    folder = tmp_path_factory.mktemp("inputs")
    save_tiny_bert(str(folder / "bert"))
    save_tiny_llama(str(folder / "llama"))
    write_corpus(folder, "finance")
    write_corpus(folder, "sport")
    return folder


def test_a_causal_lm_sequence_of_an_encoder_is_refused_before_training(
    inputs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "seq"
    stages = f"{inputs / 'finance.txt'},{inputs / 'sport.txt'}"
    with unchanged(inputs):
        refused(
            ["sequence", "--objective", "causal-lm", "--model", str(inputs / "bert"),
             "--stages", stages, "--method", "lora", "--epochs", "1", "--out", str(out),
             "--no-progress"],
            capsys,
            ENCODER,
            "objective causal-lm predicts each next token",
            NEEDS,
        )  # fmt: skip
    assert not out.exists()


def test_a_causal_lm_study_of_an_encoder_is_refused_before_its_store_exists(
    inputs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / "lifelong.yaml"
    spec.write_text(
        f"name: lifelong\nobjective: causal-lm\nmodels: [{inputs / 'llama'}, {inputs / 'bert'}]\n"
        f"sequence: [{inputs / 'finance.txt'}, {inputs / 'sport.txt'}]\nmethods: [lora]\n"
        "strategies: [sequential]\nepochs: 1\n"
    )
    with unchanged(inputs), unchanged(tmp_path):
        refused(
            ["study", "run", str(spec), "--no-progress"],
            capsys,
            f"{inputs / 'bert'} ",
            ENCODER,
            "the study's objective: causal-lm",
            NEEDS,
        )


def test_masked_lm_training_of_a_causal_only_model_is_refused(
    inputs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "mlm"
    with unchanged(inputs):
        refused(
            ["train", "--model", str(inputs / "llama"), "--data", str(inputs / "finance.txt"),
             "--task", "mlm", "--method", "lora", "--epochs", "1", "--out", str(out),
             "--no-progress"],
            capsys,
            "(llama) has no masked-LM head",
        )  # fmt: skip
    assert not out.exists()
