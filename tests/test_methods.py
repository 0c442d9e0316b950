"""The invariants every method keeps, on every architecture (issue: core library)."""

from __future__ import annotations

import pytest
import torch
from tiny_models import (
    ARCHS,
    EMBED,
    FFN,
    HEADS,
    HIDDEN,
    LAYERS,
    tiny_inputs,
    tiny_model,
    train_steps,
)

import adaptlab
from adaptlab.errors import ConfigError

INSERTING = ("houlsby", "pfeiffer", "parallel", "lora", "ia3")
SINGLE_METHODS = ("full", "head", "freeze", "bitfit", "lnfit", *INSERTING, "prefix", "mam", "lst")
LABELS = 3
D, L, F_ = HIDDEN, LAYERS, FFN


def head_count(arch: str) -> int:
    """Encoders: a d x d layer (pooler / dense / pre_classifier) then d x C; Llama: d x C."""
    if arch == "llama":
        return D * LABELS
    return D * D + D + D * LABELS + LABELS


def norm_count(arch: str) -> int:
    if arch == "llama":
        return (2 * L + 1) * D  # RMSNorm: weight only, two per block and a final one
    embed = EMBED if arch == "electra" else D
    return 2 * L * 2 * D + 2 * embed


def bottleneck(m: int) -> int:
    return 2 * D * m + m + D


def closed_form(arch: str, method: str) -> int:
    """Trainable parameters of `method`, from the architecture's dimensions alone."""
    head = head_count(arch)
    if method == "houlsby":
        return 2 * L * bottleneck(64) + norm_count(arch) + head
    if method == "pfeiffer":
        return L * bottleneck(D // 16) + head
    if method == "parallel":
        return L * bottleneck(64) + head
    if method == "lora":
        kv = D // HEADS * 2 if arch == "llama" else D
        return L * 8 * ((D + D) + (D + kv)) + head
    if method == "prefix":  # l = 30 vectors of width d through d -> 512 -> L x 2 x kv
        kv = D // HEADS * 2 if arch == "llama" else D
        return 30 * D + (D + 1) * 512 + (512 + 1) * L * 2 * kv + head
    if method == "lst":  # side width w = d / 8, FFN f = F / 8
        w, f = D // 8, F_ // 8
        layer = 4 * w + (3 * w * w + 3 * w) + (w * w + w) + (w * f + f) + (f * w + w)
        ladder = D * w + w + 1 + layer
        return (D * w + w) + L * ladder + 2 * w + (w * D + D) + head
    if method == "ia3":
        kv = D // HEADS * 2 if arch == "llama" else D
        return L * (kv + kv + F_) + head
    if method == "lnfit":
        return norm_count(arch) + head
    if method == "bitfit":
        embed = EMBED if arch == "electra" else D
        extra = D if arch == "electra" else 0  # ELECTRA's embeddings_project bias
        return L * (7 * D + F_) + embed + extra + head
    if method == "head":
        return head
    raise ValueError(method)


CLOSED_FORM_METHODS = (*INSERTING, "prefix", "lst", "lnfit", "bitfit", "head")


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("method", INSERTING)
def test_inserted_methods_leave_outputs_unchanged_at_init(arch: str, method: str) -> None:
    model = tiny_model(arch)
    inputs = tiny_inputs()
    with torch.no_grad():
        before = model(**inputs).logits
        adaptlab.adapt(model, method)
        after = model(**inputs).logits
    assert (after - before).abs().max().item() <= 1e-5


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("method", CLOSED_FORM_METHODS)
def test_trainable_counts_match_closed_form(arch: str, method: str) -> None:
    model = tiny_model(arch, num_labels=LABELS)
    if arch == "llama" and method == "bitfit":
        with pytest.raises(ConfigError, match="no bias terms"):
            adaptlab.adapt(model, method)
        return
    if arch == "mpnet" and method == "prefix":
        with pytest.raises(ConfigError, match="computes attention in its own code"):
            adaptlab.adapt(model, method)
        return
    handle = adaptlab.adapt(model, method)
    counts = handle.parameter_counts()
    assert counts["trainable"] == closed_form(arch, method)
    assert counts["trainable"] == sum(p.numel() for p in model.parameters() if p.requires_grad)


@pytest.mark.parametrize("arch", ("bert", "llama"))
def test_full_and_freeze_counts(arch: str) -> None:
    full = adaptlab.adapt(tiny_model(arch), "full").parameter_counts()
    assert full["trainable"] == full["total"]
    model = tiny_model(arch)
    handle = adaptlab.adapt(model, "freeze", k=1)
    backbone = handle.backbone
    frozen = sum(p.numel() for p in model.get_submodule(backbone.embeddings).parameters())
    frozen += sum(p.numel() for p in model.get_submodule(backbone.blocks[0].name).parameters())
    assert handle.parameter_counts()["trainable"] == full["total"] - frozen


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("method", ("houlsby", "lora+bitfit", "freeze", "lnfit", "parallel"))
def test_frozen_parameters_stay_bit_identical(arch: str, method: str) -> None:
    if arch == "llama" and "bitfit" in method:
        pytest.skip("Llama has no biases")
    model = tiny_model(arch)
    adaptlab.adapt(model, method, **({"k": 1} if method == "freeze" else {}))
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    train_steps(model)
    moved = 0
    for name, param in model.named_parameters():
        if param.requires_grad:
            moved += not torch.equal(param, before[name])
        else:
            assert torch.equal(param, before[name]), name
    assert moved > 0


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("method", ("houlsby", "full", "lora"))
def test_disabled_gives_base_outputs_from_the_same_object(arch: str, method: str) -> None:
    model = tiny_model(arch)
    inputs = tiny_inputs()
    with torch.no_grad():
        base = model(**inputs).logits
    adaptlab.adapt(model, method)
    train_steps(model)
    with torch.no_grad():
        adapted = model(**inputs).logits
        assert not torch.allclose(adapted, base)
        with adaptlab.disabled(model) as same:
            assert same is model
            assert torch.equal(model(**inputs).logits, base)
        assert torch.equal(model(**inputs).logits, adapted)


@pytest.mark.parametrize("arch", ARCHS)
def test_lora_merge_round_trip(arch: str) -> None:
    model = tiny_model(arch)
    adaptlab.adapt(model, "lora", targets=("query", "value", "ffn_out"))
    train_steps(model)
    weights = {n: p.detach().clone() for n, p in model.named_parameters()}
    inputs = tiny_inputs()
    with torch.no_grad():
        unmerged = model(**inputs).logits
        adaptlab.merge(model)
        merged = model(**inputs).logits
        adaptlab.unmerge(model)
        again = model(**inputs).logits
    assert (merged - unmerged).abs().max().item() <= 1e-5
    assert (again - unmerged).abs().max().item() <= 1e-5
    for name, param in model.named_parameters():
        assert (param - weights[name]).abs().max().item() <= 1e-5, name


def test_summary_lists_groups_and_shares() -> None:
    handle = adaptlab.adapt(tiny_model("bert"), "houlsby", hidden_size=8)
    text = handle.summary()
    for group in ("houlsby", "norms", "head", "trainable", "total"):
        assert group in text
    assert "%" in text


def test_same_seed_same_inserted_weights() -> None:
    first = adaptlab.adapt(tiny_model("bert"), "houlsby", seed=3)
    second = adaptlab.adapt(tiny_model("bert"), "houlsby", seed=3)
    other = adaptlab.adapt(tiny_model("bert"), "houlsby", seed=4)
    a, b, c = (dict(h.model.named_parameters()) for h in (first, second, other))
    name = next(n for n in a if "adaptlab.default.houlsby.down.weight" in n)
    assert torch.equal(a[name], b[name])
    assert not torch.equal(a[name], c[name])


@pytest.mark.parametrize(
    ("spec", "options", "message"),
    [
        ("full+lora", {}, "'full' cannot be combined"),
        ("head+bitfit", {}, "'head' cannot be combined"),
        ("houlsby+pfeiffer", {}, "both modify the ffn_out layers"),
        ("lora+lora", {}, "given twice"),
        ("adapterz", {}, "unknown method 'adapterz'; known methods: full, head"),
        ("houlsby", {"hiden_size": 4}, "unknown option 'hiden_size'"),
        ("houlsby", {"hidden_size": 0}, "hidden_size must be a positive integer"),
        ("houlsby", {"activation": "sigmoid"}, "activation must be one of"),
        ("lora", {"targets": ("qeury",)}, "unknown target 'qeury'"),
        ("lora", {"dropout": 1.0}, "dropout must be in"),
        ("freeze", {"k": 9}, "k=9 exceeds the 2 blocks"),
    ],
)
def test_bad_methods_fail_with_one_line(spec: str, options: dict, message: str) -> None:
    model = tiny_model("bert")
    before = {n: p.requires_grad for n, p in model.named_parameters()}
    with pytest.raises(ConfigError) as error:
        adaptlab.adapt(model, spec, **options)
    assert message in str(error.value) and "\n" not in str(error.value)
    assert {n: p.requires_grad for n, p in model.named_parameters()} == before
    assert not any(".adaptlab." in n for n, _ in model.named_parameters())


def test_allowed_combinations() -> None:
    handle = adaptlab.adapt(tiny_model("bert"), ["houlsby", {"lora": {"rank": 2}}, "bitfit"])
    assert set(handle.groups) >= {"houlsby", "lora", "biases", "head"}


def test_adapting_twice_is_refused() -> None:
    model = tiny_model("bert")
    adaptlab.adapt(model, "lora")
    with pytest.raises(ConfigError, match="already adapted"):
        adaptlab.adapt(model, "houlsby")


def test_remove_restores_a_plain_model() -> None:
    model = tiny_model("bert")
    inputs = tiny_inputs()
    with torch.no_grad():
        base = model(**inputs).logits
    names = {n for n, _ in model.named_parameters()}
    adaptlab.adapt(model, "parallel")
    adaptlab.remove(model)
    assert {n for n, _ in model.named_parameters()} == names
    with torch.no_grad():
        assert torch.equal(model(**inputs).logits, base)


def test_every_method_is_listed_with_a_description() -> None:
    names = [m.name for m in adaptlab.list_methods()]
    assert names == sorted(names, key=names.index)  # stable order
    assert set(names) == {*SINGLE_METHODS, "fusion"}
    assert all(m.description for m in adaptlab.list_methods())
