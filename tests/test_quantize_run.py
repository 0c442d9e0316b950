"""`--quantize` through the command line: a LoRA run on an NF4 base trains, its manifest says
how it was trained, the adapter evaluates on the full-precision base, and methods that train
base weights are refused before any work (64-wide tiny models: the CPU's NF4 kernels need
input widths that are multiples of 64)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_cases import refused, run_cli, unchanged, write_reviews
from tiny_models import save_tiny_bert


@pytest.fixture(scope="module")
def wide_bert(tmp_path_factory: pytest.TempPathFactory) -> str:
    return save_tiny_bert(str(tmp_path_factory.mktemp("wide-bert")), hidden=64, ffn=128)


def test_lora_on_an_nf4_base_trains_and_evaluates_on_the_float_base(
    wide_bert: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = write_reviews(tmp_path / "reviews.csv")
    out = tmp_path / "qlora"
    args = ["train", "--model", wide_bert, "--data", str(data), "--method", "lora"]
    args += ["--epochs", "1", "--learning-rate", "5e-3", "--out", str(out), "--no-progress"]
    code, _, err = run_cli([*args, "--quantize", "nf4", "--gradient-checkpointing"], capsys)
    assert code == 0, err
    assert "device: cpu, fp32, base nf4, checkpointing" in err
    manifest = json.loads((out / "adapter" / "manifest.json").read_text())
    assert manifest["scale"] == {"precision": "fp32", "base_dtype": "fp32", "quantize": "nf4"}
    code, shown, err = run_cli(
        ["eval", "--adapter", str(out), "--model", wide_bert, "--data", str(data)], capsys
    )
    assert code == 0, err
    assert "accuracy" in shown


@pytest.mark.parametrize("method", ["full", "bitfit", "lnfit", "freeze"])
def test_methods_that_train_the_base_refuse_a_frozen_base(
    wide_bert: str, method: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = write_reviews(tmp_path / "reviews.csv")
    args = ["train", "--model", wide_bert, "--data", str(data), "--method", method]
    args += ["--out", str(tmp_path / "run")]
    needle = f"{method} trains the base model's weights, which a 4-bit base keeps frozen"
    with unchanged(tmp_path):
        refused([*args, "--quantize", "nf4"], capsys, needle)
        half = ["--precision", "bf16", "--base-dtype", "bf16"]
        refused([*args, *half], capsys, "which a bf16 base keeps frozen")
