"""AdapterFusion: the layer's maths, what trains, weights read back, saving and loading."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from tiny_models import ARCHS, tiny_inputs, tiny_model, train_steps

import adaptlab
from adaptlab import Fuse
from adaptlab.errors import AdapterFileError, ConfigError
from adaptlab.methods.configs.fusion import FusionConfig
from adaptlab.methods.fusion import FusionLayer


def logits(model: torch.nn.Module) -> torch.Tensor:
    with torch.no_grad():
        return model(**tiny_inputs()).logits


def with_sources(arch: str = "bert", names=("a", "b", "c"), method: str = "pfeiffer"):
    """A model with trained source adapters (no heads of their own)."""
    model = tiny_model(arch)
    for seed, name in enumerate(names):
        adaptlab.add_adapter(model, name, method, train_head=False, seed=seed)
        adaptlab.train_adapter(model, name)
        train_steps(model, lr=5e-2)
    return model


def test_the_layer_equals_the_literal_equations() -> None:
    """s_n = softmax((Q h) . (K z_n) / T) with z_n = h + delta_n, o = h + V sum_n s_n delta_n."""
    torch.manual_seed(0)
    layer = FusionLayer(8, FusionConfig(temperature=2.0, init_std=0.5), torch.Generator())
    with torch.no_grad():
        layer.value.weight.normal_()
        layer.query.bias.normal_()
    h, z = torch.randn(2, 5, 8), torch.randn(3, 2, 5, 8)
    key_bias = torch.randn(8)  # any key bias, and keying on z_n rather than delta_n, cancels
    q = layer.query(h)
    scores = torch.stack([(q * (layer.key(zn) + key_bias)).sum(-1) for zn in z], -1) / 2.0
    weights = scores.softmax(-1)
    expected = h + sum(weights[..., n, None] * layer.value(z[n] - h) for n in range(3))
    assert torch.allclose(layer(h, z), expected, atol=1e-5)
    assert torch.allclose(layer.last_weights, weights, atol=1e-6)


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("method", ["pfeiffer", "parallel", "lora"])
def test_one_adapter_under_an_identity_value_matrix_is_that_adapter(arch: str, method: str) -> None:
    model = with_sources(arch, names=("a",), method=method)
    adaptlab.set_active(model, "a")
    alone = logits(model)
    adaptlab.add_fusion(model, Fuse("a"), train_head=False)
    adaptlab.set_active(model, Fuse("a"))
    assert torch.allclose(logits(model), alone, atol=1e-6)


def test_fusion_trains_only_its_layers_and_head() -> None:
    model = with_sources()
    sources = {
        n: {k: t.detach().clone() for k, t in adaptlab.get_handle(model, n).tensors().items()}
        for n in "abc"
    }
    handle = adaptlab.add_fusion(model, Fuse("a", "b", "c"))
    adaptlab.train_adapter(model, "fusion")
    assert adaptlab.active(model) == Fuse("a", "b", "c")
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    assert trainable == set(handle.trainable_names)
    assert set(handle.groups) == {"fusion", "head"}
    start = {n: t.detach().clone() for n, t in handle.tensors().items()}
    train_steps(model)
    for name in "abc":
        for key, tensor in adaptlab.get_handle(model, name).tensors().items():
            assert torch.equal(tensor, sources[name][key])
    assert any(not torch.equal(t, start[n]) for n, t in handle.tensors().items())


def test_fusion_weights_are_read_back_per_site() -> None:
    model = with_sources()
    adaptlab.add_fusion(model, Fuse("a", "b", "c"))
    adaptlab.set_active(model, Fuse("a", "b", "c"))
    with pytest.raises(ConfigError, match="has not run yet"):
        adaptlab.fusion_weights(model)
    logits(model)
    weights = adaptlab.fusion_weights(model)
    assert len(weights) == 2  # pfeiffer: one site (the FFN output) in each of the 2 blocks
    for site, w in weights.items():
        assert site.endswith("output.dense")
        assert w.shape == (3, 9, 3)
        assert torch.allclose(w.sum(-1), torch.ones(3, 9))


def test_the_value_penalty_adds_to_the_loss_unless_turned_off() -> None:
    model = with_sources()
    adaptlab.add_fusion(model, Fuse("a", "b"))  # lambda = 0.01 by default
    adaptlab.add_fusion(model, Fuse("b", "a"), name="plain", value_regularization=0)
    adaptlab.train_adapter(model, "plain")
    assert adaptlab.regularization_loss(model) is None
    adaptlab.train_adapter(model, "fusion")
    penalty = adaptlab.regularization_loss(model)
    assert penalty is not None and penalty.item() == 0.0  # V starts at the identity
    with torch.no_grad():
        next(iter(adaptlab.get_handle(model, "fusion").fusion_layers.values())).value.weight += 0.1
    assert adaptlab.regularization_loss(model).item() > 0  # type: ignore[union-attr]
    adaptlab.set_active(model, "a")
    assert adaptlab.regularization_loss(model) is None


@pytest.mark.parametrize("arch", ("bert", "roberta", "llama"))
def test_a_fusion_saved_then_loaded_on_a_fresh_base_gives_identical_logits(
    arch: str, tmp_path: Path
) -> None:
    model = with_sources(arch)
    adaptlab.add_fusion(model, Fuse("a", "b", "c"), temperature=0.5)
    adaptlab.train_adapter(model, "fusion")
    train_steps(model)
    expected = logits(model)
    adaptlab.save_adapter(model, tmp_path, name="fusion", task="single_label")
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["kind"] == "fusion" and manifest["fuses"] == ["a", "b", "c"]
    assert sorted(manifest["members"]) == ["a", "b", "c"]
    assert sorted(p.name for p in (tmp_path / "adapters").iterdir()) == ["a", "b", "c"]
    fresh = tiny_model(arch, head_seed=3)
    adaptlab.load_adapter(fresh, tmp_path)
    assert adaptlab.active(fresh) == Fuse("a", "b", "c")
    assert torch.equal(logits(fresh), expected)


def test_a_fusion_loads_onto_a_model_that_has_its_adapters(tmp_path: Path) -> None:
    model = with_sources()
    adaptlab.add_fusion(model, Fuse("a", "b"))
    adaptlab.train_adapter(model, "fusion")
    train_steps(model)
    expected = logits(model)
    adaptlab.save_adapter(model, tmp_path / "fusion", name="fusion")
    for name in "ab":
        adaptlab.save_adapter(model, tmp_path / name, name=name)
    fresh = tiny_model("bert")
    adaptlab.load_adapter(fresh, tmp_path / "a", activate=False)
    adaptlab.load_adapter(fresh, tmp_path / "b", activate=False)
    adaptlab.load_adapter(fresh, tmp_path / "fusion")
    assert adaptlab.list_adapters(fresh) == ["a", "b", "fusion"]
    assert torch.equal(logits(fresh), expected)


def test_a_fusion_whose_adapter_changed_or_is_missing_is_refused(tmp_path: Path) -> None:
    model = with_sources()
    adaptlab.add_fusion(model, Fuse("a", "b"))
    adaptlab.set_active(model, Fuse("a", "b"))
    adaptlab.save_adapter(model, tmp_path / "fusion", name="fusion")
    other = with_sources(names=("z", "y", "x"))  # x: seed 2, unlike a and b
    adaptlab.save_adapter(other, tmp_path / "x", name="x")
    fresh = tiny_model("bert")
    adaptlab.load_adapter(fresh, tmp_path / "x", name="a", activate=False)
    with pytest.raises(AdapterFileError, match="the model's adapter 'a' is not the one"):
        adaptlab.load_adapter(fresh, tmp_path / "fusion")
    member = tmp_path / "fusion" / "adapters" / "b" / "adapter.safetensors"
    member.write_bytes((tmp_path / "x" / "adapter.safetensors").read_bytes())
    with pytest.raises(AdapterFileError, match="contents do not match"):
        adaptlab.load_adapter(tiny_model("bert"), tmp_path / "fusion")
    for path in (tmp_path / "fusion" / "adapters" / "b").iterdir():
        path.unlink()
    (tmp_path / "fusion" / "adapters" / "b").rmdir()
    with pytest.raises(AdapterFileError, match="'b' it names is not there"):
        adaptlab.load_adapter(tiny_model("bert"), tmp_path / "fusion")


def test_adapters_of_another_base_are_refused(tmp_path: Path) -> None:
    model = with_sources(names=("a",))
    adaptlab.save_adapter(model, tmp_path, name="a")
    other = tiny_model("bert", seed=7)
    adaptlab.add_adapter(other, "mine", "lora")
    with pytest.raises(AdapterFileError, match="fingerprint"):
        adaptlab.load_adapter(other, tmp_path)
    assert adaptlab.list_adapters(other) == ["mine"]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"temperature": 0}, "temperature must be > 0"),
        ({"temperature": float("nan")}, "temperature must be a finite number"),
        ({"value_regularization": -1}, "value_regularization must be >= 0"),
    ],
)
def test_bad_fusion_options_are_one_line(options: dict, message: str) -> None:
    model = with_sources(names=("a",))
    with pytest.raises(ConfigError, match=message):
        adaptlab.add_fusion(model, ["a"], **options)
    assert adaptlab.list_adapters(model) == ["a"]
