"""A causal-LM sequence keeps its trained adapter in `<out>/adapter/`: it loads on the base
(from the sequence folder, as from a run folder), changes the model's next-token predictions,
and `adaptlab serve` takes it as a causal-LM adapter."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from cli_cases import run_cli
from test_continual_lm import write_corpus
from tiny_models import save_tiny_llama

from adaptlab import load_adapter
from adaptlab.methods.manifest import adapter_folder, parse_manifest
from adaptlab.models.loading import load_model
from adaptlab.serve.registry import is_causal_lm


def test_a_causal_lm_sequence_keeps_its_adapter_for_serving(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = save_tiny_llama(str(tmp_path / "tiny-llama"))
    corpora = [write_corpus(tmp_path, name, documents=30) for name in ("finance", "sport")]
    out = tmp_path / "lifelong"
    args = [
        "sequence", "--objective", "causal-lm", "--model", model, "--stages", ",".join(corpora),
        "--method", "lora", "--strategy", "kd-logit", "--epochs", "1", "--batch-size", "6",
        "--learning-rate", "1e-2", "--max-length", "16", "--no-single-stage", "--device", "cpu",
        "--no-progress", "--out", str(out),
    ]  # fmt: skip
    code, printed, err = run_cli(args, capsys)
    assert code == 0, err
    assert "adapter in" in printed and str(out / "adapter") in printed.replace("\n", "")
    assert adapter_folder(out) == out / "adapter"
    assert is_causal_lm(parse_manifest(out / "adapter"))

    ids = torch.tensor([[5, 17, 42, 9, 77, 31]])
    base = load_model(model, "causal_lm", seed=0).model.eval()
    adapted = load_model(model, "causal_lm", seed=0).model.eval()
    load_adapter(adapted, out)
    with torch.no_grad():
        moved = (adapted(input_ids=ids).logits - base(input_ids=ids).logits).abs().max()
    assert moved > 1e-3  # the lifelong-trained LoRA, not a fresh one (B = 0 does nothing)

    again = run_cli([*args, "--overwrite"], capsys)  # an earlier sequence with its adapter
    assert again[0] == 0, again[2]
