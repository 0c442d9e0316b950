"""A quantised frozen base (QLoRA's NF4, LLM.int8()): which layers are replaced, how close the
outputs stay, every method family training on it with the base untouched, the methods and the
merging it refuses, adapters moving between it and the full-precision base, and the manifest's
record of how an adapter was trained."""

from __future__ import annotations

import copy
import importlib.util
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
import transformers as T
from tiny_models import LAYERS, tiny_inputs, tiny_model, train_steps
from torch import nn

import adaptlab
from adaptlab.backbone import find_backbone
from adaptlab.errors import AdapterFileError, ConfigError
from adaptlab.methods.registry import check_base_stays_frozen, make_config
from adaptlab.methods.state import get_state
from adaptlab.models.fingerprint import fingerprint
from adaptlab.models.quantize import dense_weight, layer_kind, quantize_base

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("bitsandbytes") is None, reason="needs bitsandbytes"
)

LINEARS_PER_BLOCK = {"bert": 6, "llama": 7}
"""q, k, v, attention output, FFN in (Llama: gate and up), FFN out."""
SCALE = {"precision": "bf16", "base_dtype": "fp32", "quantize": "nf4"}


def wide(arch: str, **options: Any) -> nn.Module:
    """A tiny model whose layers' inputs are multiples of 64 wide, as NF4 on the CPU needs,
    with biases drawn (not zero) so that a changed bias shows."""
    model = tiny_model(arch, hidden=64, ffn=128, **options)
    generator = torch.Generator().manual_seed(options.get("seed", 0))
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if name.endswith(".bias"):
                parameter.normal_(0.0, 0.02, generator=generator)
    return model


def quantized(arch: str, kind: str = "nf4", **options: Any) -> nn.Module:
    model = wide(arch, **options)
    quantize_base(model, kind)
    return model


def relative_error(found: torch.Tensor, expected: torch.Tensor) -> float:
    return float((found - expected).norm() / expected.norm())


def last_hidden(model: nn.Module) -> torch.Tensor:
    with torch.no_grad():
        return model(**tiny_inputs(), output_hidden_states=True).hidden_states[-1]


def head_fingerprint(model: nn.Module) -> str:
    return fingerprint(model, exclude=find_backbone(model).head)


@pytest.mark.parametrize("arch", ["bert", "llama"])
def test_nf4_replaces_the_linear_layers_of_the_blocks_only(arch: str) -> None:
    model = wide(arch, causal=arch == "llama")
    original = head_fingerprint(model)
    assert quantize_base(model, "nf4") == LAYERS * LINEARS_PER_BLOCK[arch]
    blocks = find_backbone(model).blocks_name
    for name, module in model.named_modules():
        if isinstance(module, nn.Linear):
            inside = name.startswith(f"{blocks}.")
            assert (layer_kind(module) == "nf4") == inside, name
            if inside:  # QLoRA: double-quantised scales, bfloat16 compute
                assert module.weight.quant_state.nested
                assert module.compute_dtype == torch.bfloat16
    assert type(model.get_input_embeddings()) is nn.Embedding
    head = model.lm_head if arch == "llama" else model.classifier
    assert type(head) is nn.Linear
    assert head_fingerprint(model) == original  # the original weights' fingerprint


@pytest.mark.parametrize("arch", ["bert", "llama"])
def test_nf4_outputs_stay_close_to_the_float_model_and_forwards_change_no_tensor(
    arch: str,
) -> None:
    model = quantized(arch)
    tensors = {n: t.clone() for n, t in model.state_dict().items()}
    error = relative_error(last_hidden(model), last_hidden(wide(arch)))
    assert 1e-4 < error < 0.25  # changed, by what 4 bits a weight cost
    for name, tensor in model.state_dict().items():  # no bias cast, no weight repacked
        assert tensor.dtype == tensors[name].dtype and torch.equal(tensor, tensors[name]), name


@pytest.mark.parametrize("kind", ["nf4", "int8"])
def test_a_quantised_layer_passes_gradients_to_its_input_after_an_evaluation(kind: str) -> None:
    model = quantized("bert", kind)
    layer = model.bert.encoder.layer[0].attention.self.query
    with torch.no_grad():
        layer.eval()(torch.randn(2, 64))
    layer.train()
    x = torch.randn(2, 64, requires_grad=True)
    layer(x * 1.0).sum().backward()  # d/dx of the sum of W x + b: the column sums of W
    assert x.grad is not None
    expected = dense_weight(layer).float().sum(0).expand(2, -1)
    torch.testing.assert_close(x.grad, expected, rtol=0.02, atol=1e-3)


def test_int8_runs_here_and_stays_closer() -> None:
    model = wide("llama")
    assert quantize_base(model, "int8") == LAYERS * LINEARS_PER_BLOCK["llama"]
    error = relative_error(last_hidden(model), last_hidden(wide("llama")))
    assert 1e-5 < error < 0.05
    check_one_step(model, adaptlab.adapt(model, "lora"))


def single(spec: Any) -> Callable[[nn.Module], adaptlab.AdaptHandle]:
    return lambda model: adaptlab.adapt(model, spec)


def fusion(model: nn.Module) -> adaptlab.AdaptHandle:
    adaptlab.add_adapter(model, "a", "pfeiffer")
    adaptlab.add_adapter(model, "b", "pfeiffer", seed=1)
    adaptlab.add_fusion(model, adaptlab.Fuse("a", "b"))
    return adaptlab.train_adapter(model, "fusion")


def stack(model: nn.Module) -> adaptlab.AdaptHandle:
    adaptlab.add_adapter(model, "language", "houlsby", train_head=False)
    adaptlab.add_adapter(model, "task", {"lora": {"targets": ["query", "key", "value"]}})
    adaptlab.set_active(model, adaptlab.Stack("language", "task"))
    return adaptlab.train_adapter(model, "task")


FAMILIES: dict[str, Callable[[nn.Module], adaptlab.AdaptHandle]] = {
    "lora": single("lora"),
    "dora": single({"lora": {"dora": True, "dropout": 0.1, "targets": ["value", "ffn_out"]}}),
    "houlsby": single("houlsby"),
    "pfeiffer": single({"pfeiffer": {"invertible": True}}),
    "parallel": single("parallel"),
    "mam": single({"mam": {"prefix_length": 4, "hidden_size": 16, "reparam_hidden": 16}}),
    "ia3": single("ia3"),
    "prefix": single({"prefix": {"length": 4, "reparam_hidden": 16}}),
    "lst": single("lst"),
    "head": single("head"),
    "lora+houlsby": single("lora+houlsby"),
    "fusion": fusion,
    "stack": stack,
}


def check_one_step(model: nn.Module, handle: adaptlab.AdaptHandle) -> None:
    """After an evaluation, one AdamW step: a finite loss, gradients on the adapter's tensors
    only, the base's (quantised weights, their scales, everything else) bit for bit unchanged."""
    trained = {id(t) for t in handle.tensors().values()}
    model.eval()
    with torch.no_grad():  # an evaluation first, as between epochs
        model(**tiny_inputs(seed=6))
    base = {
        n: t.detach().clone()
        for n, t in model.state_dict(keep_vars=True).items()
        if id(t) not in trained
    }
    model.train()
    inputs = tiny_inputs(seed=7)
    loss = model(**inputs, labels=torch.tensor([0, 1, 2])).loss
    penalty = adaptlab.regularization_loss(model)
    loss = loss + penalty if penalty is not None else loss
    assert torch.isfinite(loss)
    loss.backward()
    for name, parameter in model.named_parameters():
        if id(parameter) in trained:
            assert parameter.grad is not None and torch.isfinite(parameter.grad).all(), name
        else:
            assert parameter.grad is None, name
    assert sum(float(t.grad.abs().sum()) for t in handle.tensors().values()) > 0  # type: ignore[union-attr]
    before = {n: t.detach().clone() for n, t in handle.tensors().items()}
    torch.optim.AdamW(handle.tensors().values(), lr=1e-2).step()
    for name, tensor in model.state_dict(keep_vars=True).items():
        if name in base:
            assert tensor.dtype == base[name].dtype and torch.equal(tensor, base[name]), name
    assert any(not torch.equal(t, before[n]) for n, t in handle.tensors().items())


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("arch", ["bert", "llama"])
def test_every_method_family_trains_a_step_on_an_nf4_base(arch: str, family: str) -> None:
    model = quantized(arch)
    check_one_step(model, FAMILIES[family](model))


def test_a_causal_lm_trains_lora_on_an_nf4_base() -> None:
    model = quantized("llama", causal=True)
    trained = {id(t) for t in adaptlab.adapt(model, "lora").tensors().values()}
    model.train()
    inputs = tiny_inputs()
    loss = model(**inputs, labels=inputs["input_ids"]).loss
    loss.backward()
    assert torch.isfinite(loss)
    assert all((p.grad is not None) == (id(p) in trained) for p in model.parameters())


@pytest.mark.parametrize(
    "method", ["full", {"freeze": {"k": 1}}, "bitfit", "lnfit", "lora+bitfit", "houlsby+lnfit"]
)
def test_methods_that_train_base_weights_are_refused(method: Any) -> None:
    name = next(iter(method)) if isinstance(method, dict) else method.split("+")[-1]
    model = quantized("bert")
    with pytest.raises(ConfigError, match=f"^{name} trains the base model's weights") as error:
        adaptlab.adapt(model, method)
    assert "\n" not in str(error.value) and "4-bit base" in str(error.value)
    assert adaptlab.list_adapters(model) == []
    with pytest.raises(ConfigError, match="8-bit base"):
        check_base_stays_frozen([make_config(name)], "int8")


def test_methods_that_leave_the_base_frozen_pass_the_check() -> None:
    configs = [make_config(n) for n in ("lora", "houlsby", "ia3", "prefix", "lst", "head")]
    check_base_stays_frozen(configs, "nf4")
    check_base_stays_frozen([adaptlab.FusionConfig()], "nf4")


@pytest.mark.parametrize("method", ["lora", "ia3"])
def test_merging_into_a_quantised_base_is_refused(method: str) -> None:
    model = quantized("bert")
    adaptlab.adapt(model, method)
    with pytest.raises(
        ConfigError,
        match=f"^cannot merge {method} into a 4-bit base; load the full-precision base to merge$",
    ):
        adaptlab.merge(model)
    assert get_state(model).merged() == []  # type: ignore[union-attr]


def test_quantising_twice_after_adapters_or_to_an_unknown_kind_is_refused() -> None:
    model = wide("bert")
    with pytest.raises(ConfigError, match="must be one of nf4, int8"):
        quantize_base(model, "int4")
    quantize_base(model, "nf4")
    with pytest.raises(ConfigError, match="already quantised"):
        quantize_base(model, "nf4")
    adapted = wide("bert")
    adaptlab.adapt(adapted, "lora")
    with pytest.raises(ConfigError, match="before adding adapters"):
        quantize_base(adapted, "nf4")
    narrow = tiny_model("bert")  # 32 wide: bitsandbytes' CPU kernel would de-quantise it wrong
    with pytest.raises(
        ConfigError, match="a multiple of 64; '.*query' takes 32: quantise on a GPU"
    ):
        quantize_base(narrow, "nf4")
    assert layer_kind(narrow.bert.encoder.layer[0].attention.self.query) is None
    assert quantize_base(narrow, "int8") == LAYERS * LINEARS_PER_BLOCK["bert"]


def test_counts_and_remove_see_the_weights_a_quantised_layer_stands_for() -> None:
    float_total = adaptlab.adapt(wide("llama"), "lora").parameter_counts()["total"]
    model = quantized("llama")
    assert adaptlab.adapt(model, "lora").parameter_counts()["total"] == float_total
    adaptlab.remove(model)
    assert all(p.requires_grad == p.is_floating_point() for p in model.parameters())


DORA = {"lora": {"dora": True, "targets": ["query", "value"]}}


@pytest.mark.parametrize("method", ["houlsby", DORA], ids=["houlsby", "dora"])
def test_an_adapter_trained_on_nf4_loads_onto_the_float_base(method: Any, tmp_path: Path) -> None:
    model = quantized("bert", head_seed=1)
    handle = adaptlab.adapt(model, method)
    train_steps(model, steps=2)
    handle.record_training_scale(**SCALE)
    adaptlab.save_adapter(model, tmp_path)
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["scale"] == SCALE
    float_base = wide("bert", head_seed=2)
    assert manifest["base_model"]["fingerprint"] == head_fingerprint(float_base)
    adaptlab.load_adapter(float_base, tmp_path)
    loaded = adaptlab.get_handle(float_base)
    assert loaded.training_scale == handle.training_scale
    saved = handle.saved_tensors()
    assert all(torch.equal(t, saved[n]) for n, t in loaded.saved_tensors().items())
    model.eval()
    assert relative_error(last_hidden(float_base), last_hidden(model)) < 0.25


@pytest.mark.parametrize("method", ["houlsby", DORA], ids=["houlsby", "dora"])
def test_an_adapter_trained_on_the_float_base_loads_onto_nf4(method: Any, tmp_path: Path) -> None:
    model = wide("bert", head_seed=1)
    handle = adaptlab.adapt(model, method)
    train_steps(model, steps=2)
    adaptlab.save_adapter(model, tmp_path)
    assert "scale" not in json.loads((tmp_path / "manifest.json").read_text())  # as before
    base = quantized("bert", head_seed=2)
    adaptlab.load_adapter(base, tmp_path)
    loaded = adaptlab.get_handle(base)
    assert loaded.training_scale is None and loaded.base_fingerprint == handle.base_fingerprint
    saved = handle.saved_tensors()
    assert all(torch.equal(t, saved[n]) for n, t in loaded.saved_tensors().items())
    assert relative_error(last_hidden(base), last_hidden(model)) < 0.25


def test_another_base_is_still_refused_when_quantised(tmp_path: Path) -> None:
    model = wide("bert")
    adaptlab.adapt(model, "lora")
    adaptlab.save_adapter(model, tmp_path)
    with pytest.raises(AdapterFileError, match="fingerprint"):
        adaptlab.load_adapter(quantized("bert", seed=5), tmp_path)


def test_dora_norms_come_from_the_dequantised_weight() -> None:
    float_model, model = wide("llama"), quantized("llama")
    before = model(**tiny_inputs()).logits.detach()
    handle = adaptlab.adapt(model, DORA)
    site = find_backbone(model).blocks[0].value
    module = dict((s, m) for s, _, m in handle.modules())[site]
    layer = model.get_submodule(site)
    norms = torch.linalg.vector_norm(dense_weight(layer), dim=1)
    assert torch.equal(module.magnitude.detach(), norms)
    float_norms = torch.linalg.vector_norm(float_model.get_submodule(site).weight, dim=1)
    assert relative_error(norms, float_norms.detach()) < 0.1
    with torch.no_grad():  # DoRA starts where its base is: the quantised model
        torch.testing.assert_close(model(**tiny_inputs()).logits, before, rtol=1e-4, atol=1e-5)


def test_the_training_scale_is_checked_where_it_is_recorded_and_read(tmp_path: Path) -> None:
    model = quantized("bert")
    handle = adaptlab.adapt(model, "lora")
    with pytest.raises(ConfigError, match="precision must be one of fp32, bf16, fp16"):
        handle.record_training_scale(precision="auto", base_dtype="fp32", quantize="nf4")
    with pytest.raises(ConfigError, match="quantize must be one of nf4, int8, none"):
        handle.record_training_scale(precision="bf16", base_dtype="fp32", quantize="int4")
    handle.record_training_scale(**SCALE)
    adaptlab.save_adapter(model, tmp_path)
    path = tmp_path / "manifest.json"
    manifest = json.loads(path.read_text())
    for scale, field in (({**SCALE, "quantize": "q2"}, "scale.quantize"), ({"x": 1}, "scale.x")):
        path.write_text(json.dumps({**manifest, "scale": scale}))
        with pytest.raises(AdapterFileError, match=field):
            adaptlab.read_manifest(tmp_path)


@pytest.mark.parametrize("kind", ["nf4", "int8"])
def test_gpt2s_conv1d_layers_quantise_and_train_lora_on_the_fused_layer(kind: str) -> None:
    """GPT-2's Conv1D layers (in x out) become bnb linear layers of the same function: the
    outputs stay close to the float model's, and LoRA on the query and value rows of the fused
    c_attn trains its tensors alone."""
    from model_zoo import BY_NAME

    gpt2 = BY_NAME["gpt2"]
    config = gpt2.config()
    config.n_embd, config.n_inner = 64, 128  # inputs 64 wide, as NF4 on the CPU needs
    torch.manual_seed(0)
    model = T.AutoModelForCausalLM.from_config(config).eval()
    reference = copy.deepcopy(model)
    assert quantize_base(model, kind) == LAYERS * 4  # c_attn, attn.c_proj, c_fc, mlp.c_proj
    assert all(layer_kind(m) == kind for n, m in model.named_modules() if n.endswith("c_attn"))
    inputs = gpt2.inputs()
    with torch.no_grad():
        error = relative_error(model(**inputs).logits, reference(**inputs).logits)
    assert 0 < error < 0.25
    trained = {id(t) for t in adaptlab.adapt(model, "lora").tensors().values()}
    model.train()
    loss = model(**inputs, labels=inputs["input_ids"]).loss
    loss.backward()
    assert torch.isfinite(loss)
    assert all((p.grad is not None) == (id(p) in trained) for p in model.parameters())
