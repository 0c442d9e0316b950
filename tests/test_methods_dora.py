"""DoRA (LoRA with dora=True): identity at init, PEFT's values, merge round trip, saving."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import torch
from tiny_models import ARCHS, HEADS, HIDDEN, LAYERS, tiny_inputs, tiny_model, train_steps

import adaptlab
from adaptlab.errors import AdapterFileError
from adaptlab.methods.dora import DoRAOutput
from adaptlab.methods.lora import LoRA
from adaptlab.methods.peft_format import export_peft

TARGETS = ("query", "value", "ffn_out")


def logits(model: torch.nn.Module) -> torch.Tensor:
    with torch.no_grad():
        return model(**tiny_inputs()).logits


def trained_dora(arch: str) -> torch.nn.Module:
    model = tiny_model(arch, head_seed=1)
    adaptlab.adapt(model, "lora", dora=True, targets=TARGETS)
    train_steps(model, lr=5e-2)
    return model


@pytest.mark.parametrize("arch", ARCHS)
def test_identity_at_init_and_merge_round_trip(arch: str) -> None:
    model = tiny_model(arch)
    base = logits(model)
    adaptlab.adapt(model, "lora", dora=True, targets=TARGETS)
    assert torch.equal(logits(model), base)  # m = ||W|| and B = 0: exactly the base layer
    train_steps(model, lr=5e-2)
    magnitudes = [p for n, p in model.named_parameters() if n.endswith(".magnitude")]
    assert magnitudes and all(p.requires_grad for p in magnitudes)
    weights = {n: p.detach().clone() for n, p in model.named_parameters()}
    adapted = logits(model)
    assert not torch.allclose(adapted, base)
    adaptlab.merge(model)
    assert (logits(model) - adapted).abs().max().item() <= 1e-5
    adaptlab.unmerge(model)
    assert (logits(model) - adapted).abs().max().item() <= 1e-5
    for name, param in model.named_parameters():
        assert (param - weights[name]).abs().max().item() <= 1e-5, name


@pytest.mark.parametrize("arch", ("bert", "llama"))
def test_same_outputs_as_peft_dora(arch: str) -> None:
    peft = pytest.importorskip("peft")
    ours = trained_dora(arch)
    expected = logits(ours)
    handle = adaptlab.get_handle(ours)
    layers = {i.site: i.module for i in handle.insertions["lora"]}
    other = tiny_model(arch, head_seed=1)
    config = peft.LoraConfig(
        r=8, lora_alpha=8, use_dora=True, target_modules=list(layers), task_type="SEQ_CLS"
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        wrapped = peft.get_peft_model(other, config)
    with torch.no_grad():
        for site, module in layers.items():
            assert isinstance(module, LoRA) and module.magnitude is not None
            layer = wrapped.base_model.model.get_submodule(site)
            layer.lora_A["default"].weight.copy_(module.A)
            layer.lora_B["default"].weight.copy_(module.B)
            layer.lora_magnitude_vector["default"].weight.copy_(module.magnitude)
        for name, tensor in handle.owned.items():  # the trained head
            wrapped.base_model.model.get_parameter(name).copy_(tensor)
    wrapped.eval()
    assert (logits(wrapped) - expected).abs().max().item() <= 1e-5


def test_save_load_exact_and_peft_export_refused(tmp_path: Path) -> None:
    model = trained_dora("roberta")
    expected = logits(model)
    adaptlab.save_adapter(model, tmp_path / "a")
    assert adaptlab.read_manifest(tmp_path / "a")["methods"][0]["config"]["dora"] is True
    fresh = tiny_model("roberta", head_seed=2)
    adaptlab.load_adapter(fresh, tmp_path / "a")
    assert torch.equal(logits(fresh), expected)
    with pytest.raises(AdapterFileError, match="is DoRA"):
        export_peft(model, tmp_path / "peft")


@pytest.mark.parametrize("arch", ARCHS)
def test_trainable_count_adds_one_magnitude_per_output(arch: str) -> None:
    plain = adaptlab.adapt(tiny_model(arch), "lora").parameter_counts()["trainable"]
    dora = adaptlab.adapt(tiny_model(arch), "lora", dora=True).parameter_counts()["trainable"]
    kv = HIDDEN // HEADS * 2 if arch == "llama" else HIDDEN  # Llama: 2 key-value heads
    assert dora - plain == LAYERS * (HIDDEN + kv)  # query and value outputs of every block


def test_configs_without_the_new_options_write_what_they_wrote_before() -> None:
    """Run ids hash a run's configs: an unset dora or mixout must not change them."""
    assert adaptlab.make_config("lora").to_dict() == {
        "rank": 8,
        "alpha": 8.0,
        "dropout": 0.0,
        "targets": ["query", "value"],
    }
    assert adaptlab.make_config("full").to_dict() == {}


def test_output_function_gradients_match_autograd() -> None:
    """DoRAOutput's hand-written backward equals autograd's on the plain expression."""
    generator = torch.Generator().manual_seed(0)

    def leaf(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=generator, dtype=torch.float64, requires_grad=True)

    h, base, update, magnitude = leaf(2, 3, 5), leaf(2, 3, 5), leaf(2, 3, 5), leaf(5)
    norms = torch.rand(5, generator=generator, dtype=torch.float64) + 0.5
    inputs = (h, base, update, magnitude, norms, 0.7)
    assert torch.autograd.gradcheck(DoRAOutput.apply, inputs)
    factor = magnitude / norms
    expected = h + (factor - 1) * base + factor * 0.7 * update
    assert torch.allclose(DoRAOutput.apply(*inputs), expected)
