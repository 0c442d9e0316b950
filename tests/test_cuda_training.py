"""Training at real-size settings on a CUDA GPU: every method family in bf16, a composition,
checkpointing with offloading, an NF4 base, save on the GPU and load on the CPU, a study run.
Every test here is skipped without a GPU (`make gpu-check` runs them where there is one)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from study_helpers import write_reviews, write_spec
from tiny_models import save_tiny_bert, save_tiny_llama

from adaptlab.cli.app import main
from adaptlab.continual import SequenceSpec, run_sequence
from adaptlab.engine.restore import load_trained
from adaptlab.records.config import TrainConfig
from adaptlab.records.scale import Scale
from adaptlab.runs.run import RunSpec, execute

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
TRAIN = TrainConfig(epochs=2, batch_size=8, learning_rate=2e-3, seed=0)
FAMILIES = [
    "lora", {"lora": {"dora": True}}, "houlsby", "parallel", "ia3", "prefix", "bitfit", "lnfit",
    "full",
]  # fmt: skip


@pytest.fixture(scope="module")
def bert(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    folder = tmp_path_factory.mktemp("cuda")
    return save_tiny_bert(str(folder / "bert")), str(write_reviews(folder / "r.csv", rows=120))


@pytest.mark.parametrize("method", FAMILIES, ids=str)
def test_every_method_family_trains_in_bf16_on_cuda(
    bert: tuple[str, str], method: object, tmp_path: Path
) -> None:
    model, data = bert
    trains_base = method in ("bitfit", "lnfit", "full")  # their base stays float32
    scale = Scale("bf16", base_dtype="fp32" if trains_base else "bf16")
    spec = RunSpec.build(model, data, method, train=TRAIN, scale=scale)  # type: ignore[arg-type]
    assert spec.device == "cuda"  # "auto" picks the GPU
    record = execute(spec, tmp_path / "run", progress=False)
    assert all(torch.isfinite(torch.tensor(epoch.train_loss)) for epoch in record.epochs)
    assert (record.peak_memory_bytes or 0) > 0


def test_a_stack_with_checkpointing_and_offload_equals_its_cpu_run(
    bert: tuple[str, str], tmp_path: Path
) -> None:
    model, data = bert
    lang = execute(
        RunSpec.build(model, data, "pfeiffer", train=TRAIN, device="cpu"), tmp_path / "lang"
    )
    assert lang.test
    runs = {}
    for device in ("cpu", "cuda"):
        scale = Scale("fp32", gradient_checkpointing=True, offload_activations=device == "cuda")
        spec = RunSpec.build(
            model, data, "lora", train=TRAIN, device=device, scale=scale,
            stack=(str(tmp_path / "lang"),),
        )  # fmt: skip
        runs[device] = execute(spec, tmp_path / device, progress=False)
    cpu, gpu = runs["cpu"].epochs, runs["cuda"].epochs
    assert [e.train_loss for e in gpu] == pytest.approx([e.train_loss for e in cpu], rel=1e-3)


def test_nf4_lora_trains_on_cuda_and_loads_on_the_full_precision_base(
    bert: tuple[str, str], tmp_path: Path
) -> None:
    model, data = bert
    spec = RunSpec.build(model, data, "lora", train=TRAIN, scale=Scale("bf16", quantize="nf4"))
    record = execute(spec, tmp_path / "nf4", progress=False)
    loaded, _ = load_trained(tmp_path / "nf4", "cpu", model=model)
    assert next(loaded.model.parameters()).device.type == "cpu"
    assert record.test["accuracy"] >= 0


def test_saved_on_cuda_evaluates_the_same_on_the_cpu(
    bert: tuple[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model, data = bert
    record = execute(RunSpec.build(model, data, "houlsby", train=TRAIN), tmp_path / "run")
    argv = ["eval", "--adapter", str(tmp_path / "run"), "--data", data, "--split", "test"]
    with pytest.raises(SystemExit) as done:
        main([*argv, "--model", model, "--device", "cpu", "--json"])
    assert done.value.code == 0
    on_cpu = json.loads(capsys.readouterr().out)
    assert {k: on_cpu[k] for k in record.test} == pytest.approx(dict(record.test), abs=1e-4)


def test_causal_lm_sequence_in_bf16_with_checkpointing(tmp_path: Path) -> None:
    model = save_tiny_llama(str(tmp_path / "llama"))
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(f"document {i} says the sky is blue." for i in range(60)))
    spec = SequenceSpec.build(
        model, [str(corpus)], "lora", "sequential", objective="causal-lm", train=TRAIN,
        scale=Scale("bf16", base_dtype="bf16", gradient_checkpointing=True),
    )  # fmt: skip
    result = run_sequence(spec, progress=False)
    assert result.matrix[0][0] > 0


def test_a_study_runs_on_cuda(
    bert: tuple[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model, data = bert
    spec = write_spec(tmp_path, model, data, precision="bf16", gradient_checkpointing=True)
    with pytest.raises(SystemExit) as done:
        main(["study", "run", str(spec), "--no-progress"])
    assert done.value.code == 0, capsys.readouterr().err
