"""Saving an adaptation as safetensors + manifest and loading it onto a fresh base."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import safetensors.torch
import torch
from tiny_models import ARCHS, tiny_inputs, tiny_model, train_steps

import adaptlab
from adaptlab.errors import AdapterFileError

METHODS = ("houlsby", "pfeiffer", "parallel", "lora+bitfit", "lnfit", "freeze", "full", "head")


def trained(arch: str, method: str, folder: Path) -> torch.Tensor:
    model = tiny_model(arch, head_seed=1)
    options = {"k": 1} if method == "freeze" else {}
    adaptlab.adapt(model, method, **options)
    train_steps(model)
    adaptlab.save_adapter(model, folder, base_model_id="tiny", task="single_label")
    with torch.no_grad():
        return model(**tiny_inputs()).logits


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("method", METHODS)
def test_save_then_load_reproduces_logits_exactly(arch: str, method: str, tmp_path: Path) -> None:
    if arch == "llama" and "bitfit" in method:
        pytest.skip("Llama has no biases")
    expected = trained(arch, method, tmp_path)
    fresh = tiny_model(arch, head_seed=2)  # same body, a different fresh head
    adaptlab.load_adapter(fresh, tmp_path)
    with torch.no_grad():
        assert torch.equal(fresh(**tiny_inputs()).logits, expected)


def test_folder_holds_only_trainable_tensors_and_manifest(tmp_path: Path) -> None:
    trained("bert", "houlsby", tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["adapter.safetensors", "manifest.json"]
    manifest = adaptlab.read_manifest(tmp_path)
    model = tiny_model("bert")
    handle = adaptlab.adapt(model, "houlsby")
    assert manifest["tensors"]["parameters"] == handle.parameter_counts()["trainable"]
    assert manifest["tensors"]["bytes"] == (tmp_path / "adapter.safetensors").stat().st_size
    assert manifest["methods"] == [{"name": "houlsby", "config": handle.configs[0].to_dict()}]
    assert manifest["base_model"]["id"] == "tiny"
    assert manifest["base_model"]["fingerprint"] == handle.base_fingerprint
    assert manifest["label_names"] == ["LABEL_0", "LABEL_1", "LABEL_2"]
    assert manifest["library_version"] == adaptlab.__version__
    assert not any(p.suffix in {".bin", ".pt", ".pkl"} for p in tmp_path.iterdir())


def test_another_base_is_refused(tmp_path: Path) -> None:
    trained("bert", "lora", tmp_path)
    other = tiny_model("bert", seed=5)
    with pytest.raises(AdapterFileError, match="fingerprint") as error:
        adaptlab.load_adapter(other, tmp_path)
    assert "\n" not in str(error.value)
    adaptlab.adapt(other, "houlsby")  # the refused model is left un-adapted


def test_another_head_shape_is_refused(tmp_path: Path) -> None:
    trained("bert", "lora", tmp_path)
    with pytest.raises(AdapterFileError, match="has shape"):
        adaptlab.load_adapter(tiny_model("bert", num_labels=5), tmp_path)


def test_another_model_class_is_refused(tmp_path: Path) -> None:
    trained("llama", "lora", tmp_path)
    with pytest.raises(AdapterFileError, match="saved from a LlamaForSequenceClassification"):
        adaptlab.load_adapter(tiny_model("llama", causal=True), tmp_path)


@pytest.mark.parametrize("damage", ["truncate", "flip", "delete", "manifest"])
def test_damaged_folders_fail_with_one_line(damage: str, tmp_path: Path) -> None:
    trained("bert", "houlsby", tmp_path)
    tensors = tmp_path / "adapter.safetensors"
    if damage == "truncate":
        tensors.write_bytes(tensors.read_bytes()[:100])
    elif damage == "flip":
        data = bytearray(tensors.read_bytes())
        data[-5] ^= 0xFF
        tensors.write_bytes(bytes(data))
    elif damage == "delete":
        tensors.unlink()
    else:
        (tmp_path / "manifest.json").write_text("{not json")
    with pytest.raises(AdapterFileError) as error:
        adaptlab.load_adapter(tiny_model("bert"), tmp_path)
    assert "\n" not in str(error.value)


def test_not_an_adapter_folder(tmp_path: Path) -> None:
    with pytest.raises(AdapterFileError, match="no manifest.json"):
        adaptlab.load_adapter(tiny_model("bert"), tmp_path)


def test_newer_format_is_refused(tmp_path: Path) -> None:
    trained("bert", "lora", tmp_path)
    path = tmp_path / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest["format_version"] = 99
    path.write_text(json.dumps(manifest))
    with pytest.raises(AdapterFileError, match="format version 99"):
        adaptlab.load_adapter(tiny_model("bert"), tmp_path)


def test_saving_merged_lora_is_refused(tmp_path: Path) -> None:
    model = tiny_model("bert")
    adaptlab.adapt(model, "lora")
    adaptlab.merge(model)
    with pytest.raises(AdapterFileError, match="unmerge"):
        adaptlab.save_adapter(model, tmp_path)


def test_loaded_adapter_can_still_be_switched_off(tmp_path: Path) -> None:
    trained("bert", "full", tmp_path)
    fresh = tiny_model("bert", head_seed=1)
    with torch.no_grad():
        base = fresh(**tiny_inputs()).logits
        adaptlab.load_adapter(fresh, tmp_path)
        with adaptlab.disabled(fresh):
            assert torch.equal(fresh(**tiny_inputs()).logits, base)


def test_a_format_1_folder_loads_as_the_adapter_default(tmp_path: Path) -> None:
    """Folders adaptlab 0.1.0 wrote: no name, kind, composition or members; same tensor names."""
    expected = trained("bert", "houlsby", tmp_path)
    path = tmp_path / "manifest.json"
    manifest = json.loads(path.read_text())
    for key in ("name", "kind", "composition", "members"):
        del manifest[key]
    manifest["format_version"] = 1
    path.write_text(json.dumps(manifest))
    names = safetensors.torch.load_file(str(tmp_path / "adapter.safetensors"))
    assert any(".adaptlab_houlsby.down.weight" in n for n in names)  # 0.1.0's tensor names
    fresh = tiny_model("bert", head_seed=2)
    adaptlab.load_adapter(fresh, tmp_path)
    assert adaptlab.list_adapters(fresh) == ["default"]
    with torch.no_grad():
        assert torch.equal(fresh(**tiny_inputs()).logits, expected)
