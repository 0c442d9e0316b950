"""`adaptlab train` from the command line on families whose layers are fused or oddly named:
GPT-2 (Conv1D, one query-key-value layer) and GPT-NeoX / Pythia (query_key_value, per head)
learn an SFT task with LoRA and answer at `/v1/completions` as `model.generate` does;
DeBERTa-v2 (query_proj, ...) learns a classification CSV; mT5 (attention wider than the
model) learns a sequence-to-sequence task."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import safetensors.torch
from cli_cases import run_cli, write_reviews
from generative_helpers import write_pairs
from tiny_models import save_family

import adaptlab
from adaptlab.models.loading import load_model, load_tokenizer

TRAIN = ["train", "--method", "lora", "--epochs", "1", "--batch-size", "8", "--seed", "0"]
GENERATION = ["--max-new-tokens", "3"]


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("families")
    names = ("gpt2", "gpt_neox", "deberta-v2", "mt5")
    return {name: save_family(str(root / name), name) for name in names}


@pytest.fixture()
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    write_pairs(tmp_path / "pairs.jsonl", 40)
    write_reviews(tmp_path / "reviews.csv")
    return tmp_path


def train(model: str, capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    code, _, err = run_cli([*TRAIN, "--model", model, *args, "--out", "run"], capsys)
    assert code == 0, err
    return json.loads(Path("run/metrics.json").read_text())  # type: ignore[no-any-return]


@pytest.mark.parametrize("family", ["gpt2", "gpt_neox"])
def test_a_fused_decoder_learns_sft_with_lora_and_serves_completions(
    family: str, models: dict[str, str], work: Path
) -> None:
    """`adaptlab train` runs as a command of its own (a server thread never shares a captured
    stderr with it)."""
    pytest.importorskip("fastapi")
    httpx = pytest.importorskip("httpx")
    from serve_helpers import running
    from test_serve_generation import assert_greedy

    from adaptlab.serve import AdapterService, ServeOptions, create_app

    model = models[family]
    command = [*TRAIN, "--model", model, "--data", "pairs.jsonl", "--task", "sft", *GENERATION]
    done = subprocess.run(
        [sys.executable, "-m", "adaptlab", *command, "--out", "run", "--no-progress"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads((work / "run" / "metrics.json").read_text())
    assert result["data"]["task"] == "sft" and "exact_match" in result["test"]
    tensors = safetensors.torch.load_file(str(work / "run" / "adapter" / "adapter.safetensors"))
    parts = {name.split("lora.")[1] for name in tensors}
    fused = {f"{role}.{factor}" for role in ("query", "key", "value") for factor in "AB"}
    assert parts == {*fused, "A", "B"}, parts  # the fused layer's rows; whole layers beside

    registry = work / "registry"
    shutil.copytree(work / "run" / "adapter", registry / "qa")
    service = AdapterService(ServeOptions(model=model, adapters=str(registry), max_tokens=16))
    reference = load_model(model, "causal_lm").model.eval()
    adaptlab.load_adapter(reference, registry / "qa")
    prompt = "what is 3 plus 3 ?"
    try:
        with running(create_app(service)) as url:
            body = {"model": "qa", "prompt": prompt, "max_tokens": 4, "temperature": 0}
            response = httpx.post(f"{url}/v1/completions", json=body, timeout=120)
    finally:
        service.close()
    assert response.status_code == 200, response.text
    ids = load_tokenizer(model)(prompt).input_ids
    assert_greedy(response.json()["choices"][0]["text"], reference, ids, 4, exact=True)


def test_deberta_v2_learns_a_classification_csv(
    models: dict[str, str], work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    result = train(models["deberta-v2"], capsys, "--data", "reviews.csv")
    manifest = json.loads((work / "run" / "adapter" / "manifest.json").read_text())
    assert manifest["base_model"]["class"] == "DebertaV2ForSequenceClassification"
    code, out, err = run_cli(
        ["eval", "--adapter", "run", "--model", models["deberta-v2"], "--data", "reviews.csv",
         "--json"],
        capsys,
    )  # fmt: skip
    assert code == 0, err
    assert json.loads(out)["loss"] == pytest.approx(result["test_loss"], rel=1e-4)


def test_mt5_learns_a_seq2seq_task(
    models: dict[str, str], work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    result = train(models["mt5"], capsys, "--data", "pairs.jsonl", "--task", "seq2seq", *GENERATION)
    assert result["data"]["task"] == "seq2seq" and result["test"]["perplexity"] > 1
