"""The spectrum of weight updates: effective ranks and intruder dimensions exact on constructed
matrices, the updates read from LoRA (on a plain and on a fused layer), (IA)3 and full
fine-tuning equal to their definitions, the model left bit for bit as it was, and
`adaptlab analyze spectrum` on trained runs (a refusal, in one line, for a run without one)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from cli_cases import refused, run_cli, train_run, write_reviews
from model_zoo import BY_NAME
from tiny_models import tiny_model

import adaptlab
from adaptlab.analysis.spectrum import effective_rank, intruder_similarity, update_spectrum
from adaptlab.analysis.updates import weight_updates
from adaptlab.records.config import TrainConfig
from adaptlab.runs.run import RunSpec, execute


def orthogonal(n: int, seed: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    q, _ = torch.linalg.qr(torch.randn(n, n, generator=generator, dtype=torch.float64))
    return q


def hadamard(n: int) -> torch.Tensor:
    """Orthonormal columns whose entries are all ±1/sqrt(n) (n a power of two)."""
    h = torch.ones(1, 1, dtype=torch.float64)
    while h.shape[0] < n:
        h = torch.cat([torch.cat([h, h], 1), torch.cat([h, -h], 1)])
    return h / n**0.5


def test_effective_ranks_of_known_singular_values() -> None:
    """Squares 16, 9, 4, 1 of 30: one value holds 53%, three 97%, all four 100%."""
    values = torch.tensor([4.0, 3.0, 2.0, 1.0, 0, 0, 0, 0], dtype=torch.float64)
    delta = orthogonal(8, 1) @ torch.diag(values) @ orthogonal(8, 2).T
    spectrum = update_spectrum(torch.eye(8) * 5, delta)
    assert spectrum.effective_ranks == {"0.5": 1, "0.9": 3, "0.99": 4}
    assert effective_rank(torch.zeros(5), 0.9) == 0
    assert spectrum.singular_values[:4] == pytest.approx([4, 3, 2, 1], abs=1e-9)
    assert spectrum.relative_norm == pytest.approx(30**0.5 / (5 * 8**0.5), rel=1e-9)


@pytest.mark.parametrize("intruders", [0, 1, 3, 7])
def test_intruder_dimensions_are_counted_exactly(intruders: int) -> None:
    """Base W = diag(s): its singular vectors are the axes. The adapted matrix's top singular
    vectors are `intruders` directions spread evenly over the first 16 axes (cosine 1/4 with
    each, below 0.5), then axes 16, 17, ... (cosine 1 with a base vector)."""
    n = 32
    base = torch.diag(torch.linspace(2.0, 1.0, n, dtype=torch.float64))
    spread = hadamard(16)
    columns = [torch.cat([spread[:, j], torch.zeros(16, dtype=torch.float64)]) for j in range(16)]
    axes = [torch.eye(n, dtype=torch.float64)[:, 16 + i] for i in range(16)]
    left = torch.stack([*columns[:intruders], *axes, *columns[intruders:]], dim=1)
    values = torch.linspace(100.0, 10.0, n, dtype=torch.float64)
    adapted = left @ torch.diag(values) @ orthogonal(n, 3).T
    similarity = intruder_similarity(base, adapted, 10)
    assert similarity[:intruders].tolist() == pytest.approx([0.25] * intruders, abs=1e-9)
    assert similarity[intruders:].tolist() == pytest.approx([1.0] * (10 - intruders), abs=1e-9)
    assert update_spectrum(base, adapted - base).intruders == intruders


def test_a_lora_update_is_s_b_a_its_rank_at_most_r_and_the_model_unchanged() -> None:
    model = tiny_model("llama")
    handle = adaptlab.adapt(model, "lora", rank=3, targets=("query", "ffn_out"))
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for tensor in handle.tensors().values():
            tensor.add_(torch.randn(tensor.shape, generator=generator))
    before = {n: t.clone() for n, t in model.state_dict().items()}
    updates = weight_updates(model, handle)
    assert all(torch.equal(before[n], t) for n, t in model.state_dict().items())
    assert {(m.role, m.kind) for m in updates.matrices} == {
        ("query", "attention"),
        ("ffn_out", "ffn"),
    }
    lora = model.get_submodule("model.layers.1.self_attn.q_proj.adaptlab.default.lora")
    found = next(m for m in updates.matrices if m.name == "model.layers.1.self_attn.q_proj.weight")
    torch.testing.assert_close(found.delta, (lora.B @ lora.A * lora.scaling).detach())
    for matrix in updates.matrices:
        ranks = update_spectrum(matrix.weight, matrix.delta).effective_ranks
        assert 1 <= ranks["0.99"] <= 3


def test_lora_on_gpt2s_fused_layer_is_one_matrix_per_part() -> None:
    """The query's and the value's rows of c_attn (a Conv1D, read as (out, in)) are two
    matrices; the key's rows are unchanged and left out."""
    model = BY_NAME["gpt2"].model()
    handle = adaptlab.adapt(model, "lora", rank=2)
    with torch.no_grad():
        for name, tensor in handle.tensors().items():
            if name.endswith(".B"):
                tensor.normal_()
    updates = weight_updates(model, handle)
    names = sorted(m.name for m in updates.matrices if m.layer == 0)
    layer = "transformer.h.0.attn.c_attn"
    assert names == [f"{layer}.weight[query]", f"{layer}.weight[value]"]
    query = next(m for m in updates.matrices if m.name == f"{layer}.weight[query]")
    pair = model.get_submodule(f"{layer}.adaptlab.default.lora.query")
    torch.testing.assert_close(query.delta, (pair.B @ pair.A * pair.scaling).detach())
    weight = model.get_submodule(layer).weight.detach().T  # Conv1D: (in, out)
    torch.testing.assert_close(query.weight, weight[:32])


def test_ia3_and_full_fine_tuning_updates() -> None:
    """(IA)3's key vector rescales W_k's rows: ΔW = (diag(l) - 1) W_k; full fine-tuning's ΔW is
    the trained weight minus the base's."""
    model = tiny_model("bert")
    handle = adaptlab.adapt(model, "ia3", targets=("key",))
    scale = model.get_submodule("bert.encoder.layer.0.attention.self.key.adaptlab.default.ia3")
    with torch.no_grad():
        scale.scale.uniform_(0.5, 1.5)
        model.get_submodule("bert.encoder.layer.0.attention.self.key").bias.uniform_(-1, 1)
    before = {n: t.clone() for n, t in model.state_dict().items()}
    updates = weight_updates(model, handle)
    assert all(torch.equal(before[n], t) for n, t in model.state_dict().items())
    key = model.get_submodule("bert.encoder.layer.0.attention.self.key").weight.detach()
    found = next(m for m in updates.matrices if m.layer == 0)
    torch.testing.assert_close(found.delta, (scale.scale.detach()[:, None] - 1) * key)

    model = tiny_model("bert")
    handle = adaptlab.adapt(model, "full")
    name = "bert.encoder.layer.1.output.dense.weight"
    with torch.no_grad():
        handle.owned[name].add_(0.1)
    updates = weight_updates(model, handle)
    changed = [m for m in updates.matrices if bool(m.delta.any())]
    assert [m.name for m in changed] == [name]
    torch.testing.assert_close(changed[0].delta, torch.full_like(changed[0].delta, 0.1))


def test_methods_without_a_weight_matrix_are_named() -> None:
    model = tiny_model("bert")
    handle = adaptlab.adapt(model, "lora+bitfit")
    assert weight_updates(model, handle).without_matrix == ["bitfit"]


@pytest.fixture(scope="module")
def runs(tiny_model_dir: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A LoRA and a BitFit classifier run of the tiny BERT."""
    root = tmp_path_factory.mktemp("spectrum")
    data = write_reviews(root / "reviews.csv")
    train = TrainConfig(epochs=1, batch_size=16, learning_rate=1e-2, seed=0)
    lora = root / "lora"
    execute(RunSpec.build(tiny_model_dir, str(data), "lora", train=train), lora, progress=False)
    return {"lora": lora, "bitfit": train_run(tiny_model_dir, data, root / "bitfit")}


def test_the_command_writes_a_table_json_and_png(
    runs: dict[str, Path], tiny_model_dir: str, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["analyze", "spectrum", "--adapter", str(runs["lora"]), "--model", tiny_model_dir]
    code, out, err = run_cli(args, capsys)
    assert code == 0, err
    assert "effective rank (90%)" in out and "attention" in out
    result = json.loads((runs["lora"] / "analysis" / "spectrum.json").read_text())
    assert result["methods"] == ["lora"] and result["top_k"] == 10
    assert {m["role"] for m in result["matrices"]} == {"query", "value"}
    assert all(1 <= m["effective_ranks"]["0.99"] <= 8 for m in result["matrices"])
    assert (runs["lora"] / "analysis" / "spectrum.png").read_bytes()[:4] == b"\x89PNG"


def test_a_run_that_changes_no_matrix_is_refused_with_nothing_written(
    runs: dict[str, Path], tiny_model_dir: str, capsys: pytest.CaptureFixture[str]
) -> None:
    run = runs["bitfit"]
    args = ["analyze", "spectrum", "--adapter", str(run), "--model", tiny_model_dir]
    refused(args, capsys, "bitfit changes no weight matrix", "analyze rsa or cka")
    assert not (run / "analysis" / "spectrum.json").exists()
    refused([*args, "--epsilon", "1.5"], capsys, "epsilon must be in (0, 1]")
