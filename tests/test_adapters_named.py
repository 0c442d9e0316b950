"""Many named adapters on one model: activation, deletion, training one, Stack and Parallel."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from tiny_models import ARCHS, tiny_inputs, tiny_model, train_steps

import adaptlab
from adaptlab import Fuse, Parallel, Stack
from adaptlab.errors import ConfigError


def logits(model: torch.nn.Module, **kwargs: object) -> torch.Tensor:
    with torch.no_grad():
        return model(**tiny_inputs(), **kwargs).logits


def two_trained(arch: str = "bert", first: str = "houlsby", second: str = "lora"):
    """A model with adapters a (trained, `first`) and b (trained, `second`); b runs."""
    model = tiny_model(arch)
    base = logits(model)
    adaptlab.add_adapter(model, "a", first, seed=1)
    adaptlab.train_adapter(model, "a")
    train_steps(model)
    adaptlab.add_adapter(model, "b", second, seed=2)
    adaptlab.train_adapter(model, "b")
    train_steps(model)
    return model, base


@pytest.mark.parametrize("arch", ARCHS)
def test_activating_deactivating_and_deleting_round_trip_exactly(arch: str) -> None:
    model, base = two_trained(arch)
    names = {n for n, _ in tiny_model(arch).named_parameters()}
    b = logits(model)
    adaptlab.set_active(model, "a")
    a = logits(model)
    assert not torch.allclose(a, b) and not torch.allclose(a, base)
    adaptlab.set_active(model, None)
    assert torch.equal(logits(model), base)  # inactive adapters change nothing
    adaptlab.set_active(model, "b")
    assert torch.equal(logits(model), b)
    with adaptlab.disabled(model):
        assert torch.equal(logits(model), base)
    assert torch.equal(logits(model), b)
    adaptlab.delete_adapter(model, "b")
    assert adaptlab.active(model) is None and adaptlab.list_adapters(model) == ["a"]
    assert torch.equal(logits(model), base)
    adaptlab.set_active(model, "a")
    assert torch.equal(logits(model), a)
    adaptlab.delete_adapter(model, "a")
    assert torch.equal(logits(model), base)
    assert {n for n, _ in model.named_parameters()} == names
    assert not any(hook for hook in model._forward_hooks.values())


def test_training_one_adapter_leaves_the_others_and_the_base_bit_identical() -> None:
    model, _ = two_trained("bert", "houlsby", "pfeiffer")
    a_before = {n: t.detach().clone() for n, t in adaptlab.get_handle(model, "a").tensors().items()}
    base_before = {n: p.detach().clone() for n, p in tiny_model("bert").named_parameters()}
    handle = adaptlab.train_adapter(model, "b")
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    assert trainable == set(handle.trainable_names)
    b_before = {n: t.detach().clone() for n, t in handle.tensors().items()}
    train_steps(model)
    for name, tensor in adaptlab.get_handle(model, "a").tensors().items():
        assert torch.equal(tensor, a_before[name]), name
    assert all(not torch.equal(t, b_before[n]) for n, t in handle.tensors().items() if "up" in n)
    with adaptlab.disabled(model):
        for name, param in model.named_parameters():
            if name in base_before:
                assert torch.equal(param, base_before[name]), name


def test_each_adapter_keeps_its_own_head_and_norms() -> None:
    model, _ = two_trained("bert", "houlsby", "lnfit")
    a, b = adaptlab.get_handle(model, "a"), adaptlab.get_handle(model, "b")
    for name in ("classifier.weight", "bert.embeddings.LayerNorm.weight"):
        assert not torch.equal(a.owned[name], b.owned[name])
        adaptlab.set_active(model, "a")
        assert model.get_parameter(name) is a.owned[name]
        adaptlab.set_active(model, "b")
        assert model.get_parameter(name) is b.owned[name]


def test_stack_runs_adapters_in_order() -> None:
    model, _ = two_trained("bert", "pfeiffer", "parallel")
    adaptlab.add_adapter(model, "c", "pfeiffer", train_head=False, seed=3)
    adaptlab.set_active(model, "a")
    a = logits(model)
    adaptlab.set_active(model, Stack("a", "c"))  # c is an identity and has no head: a's runs
    assert torch.allclose(logits(model), a, atol=1e-6)
    adaptlab.set_active(model, Stack("a", "b"))
    ab = logits(model)
    adaptlab.set_active(model, Stack("b", "a"))
    assert not torch.allclose(ab, logits(model))  # the head is the top adapter's
    adaptlab.set_active(model, "a")
    assert torch.equal(logits(model), a)


def test_a_stack_trains_only_its_top_adapter_and_saves_the_one_below(tmp_path: Path) -> None:
    model = tiny_model("bert")
    adaptlab.add_adapter(model, "lang", "pfeiffer", train_head=False, seed=1)
    adaptlab.train_adapter(model, "lang")
    train_steps(model)
    lang = {n: t.detach().clone() for n, t in adaptlab.get_handle(model, "lang").tensors().items()}
    adaptlab.add_adapter(model, "task", "houlsby", seed=2)
    adaptlab.set_active(model, Stack("lang", "task"))
    adaptlab.train_adapter(model, "task")
    assert adaptlab.active(model) == Stack("lang", "task")
    train_steps(model)
    for name, tensor in adaptlab.get_handle(model, "lang").tensors().items():
        assert torch.equal(tensor, lang[name])
    expected = logits(model)
    adaptlab.save_adapter(model, tmp_path, name="task")
    assert (tmp_path / "adapters" / "lang" / "adapter.safetensors").is_file()
    fresh = tiny_model("bert", head_seed=5)
    adaptlab.load_adapter(fresh, tmp_path)
    assert adaptlab.active(fresh) == Stack("lang", "task")
    assert torch.equal(logits(fresh), expected)


def test_parallel_gives_each_branch_its_own_adapter_and_head() -> None:
    model, _ = two_trained("bert", "houlsby", "lora")
    with pytest.raises(ConfigError, match="trains pretrained weights"):
        adaptlab.set_active(model, Parallel("a", "b"))  # houlsby trains the norms
    model, _ = two_trained("bert", "pfeiffer", "lora")
    adaptlab.set_active(model, "a")
    a = logits(model)
    adaptlab.set_active(model, "b")
    b = logits(model)
    adaptlab.set_active(model, Parallel("a", "b"))
    both = logits(model)
    assert both.shape[0] == 2 * a.shape[0]
    first, second = both.chunk(2)
    assert torch.allclose(first, a, atol=1e-6) and torch.allclose(second, b, atol=1e-6)
    adaptlab.set_active(model, "a")
    assert torch.equal(logits(model), a)


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: Fuse("a", Stack("b")), "Fuse cannot hold a Stack block"),
        (lambda: Stack("a", Parallel("b")), "Parallel must be the outermost block"),
        (lambda: Stack("a", "b", "a"), "appears twice"),
        (lambda: Parallel(Stack("a", "b"), "b"), "appears twice"),
        (lambda: Stack(), "needs at least one adapter"),
        (lambda: Fuse("a", 3), "Fuse cannot hold 3"),
    ],
)
def test_bad_nesting_is_one_line(build, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as error:
        build()
    assert "\n" not in str(error.value)


@pytest.mark.parametrize(
    ("composition", "message"),
    [
        ("zz", "no adapter named 'zz' on this model; adapters: a, b, c"),
        (Stack("a", "zz"), "no adapter named 'zz'"),
        (Fuse("a", "c"), "trains pretrained weights \\(biases, norms\\)"),
        (Fuse("a"), "no fusion layers for Fuse\\('a'\\)"),
        (Stack("b", "c", "a"), "adapters 'b' and 'c' both train"),
    ],
)
def test_compositions_the_model_cannot_run_are_refused(composition, message: str) -> None:
    model, base = two_trained("bert", "pfeiffer", "lnfit")
    adaptlab.add_adapter(model, "c", "bitfit+lnfit")
    before = logits(model)
    with pytest.raises(ConfigError, match=message) as error:
        adaptlab.set_active(model, composition)
    assert "\n" not in str(error.value)
    assert torch.equal(logits(model), before) and adaptlab.active(model) == "b"


@pytest.mark.parametrize("name", ["", "a.b", "../x", "x/y", "-x", "a" * 65, 3])
def test_bad_adapter_names_are_refused(name: object) -> None:
    model = tiny_model("bert")
    with pytest.raises(ConfigError, match="bad adapter name"):
        adaptlab.add_adapter(model, name, "lora")  # type: ignore[arg-type]
    assert adaptlab.list_adapters(model) == []


def test_a_name_is_taken_once_and_adapt_keeps_its_meaning() -> None:
    model = tiny_model("bert")
    adaptlab.add_adapter(model, "a", "lora")
    with pytest.raises(ConfigError, match="already has an adapter named 'a'"):
        adaptlab.add_adapter(model, "a", "houlsby")
    handle = adaptlab.adapt(model, "houlsby")
    assert handle.name == "default" and adaptlab.active(model) == "default"
    assert adaptlab.list_adapters(model) == ["a", "default"]
    with pytest.raises(ConfigError, match="already adapted"):
        adaptlab.adapt(model, "lora")


def test_merge_is_declared_by_the_method_and_works_beside_other_adapters() -> None:
    model, _ = two_trained("bert", "houlsby", "lora")
    adaptlab.set_active(model, "b")
    before = logits(model)
    adaptlab.merge(model, "b")
    assert torch.allclose(logits(model), before, atol=1e-5)
    with pytest.raises(ConfigError, match="unmerge it before"):
        adaptlab.set_active(model, "a")
    adaptlab.unmerge(model, "b")
    adaptlab.set_active(model, "a")
    with pytest.raises(ConfigError, match="nothing to merge"):
        adaptlab.merge(model, "a")
    with pytest.raises(ConfigError, match="'b' is not active"):
        adaptlab.merge(model, "b")


def test_an_adapter_without_initial_copies_cannot_be_switched_off() -> None:
    model = tiny_model("bert")
    adaptlab.adapt(model, "bitfit", keep_initial=False)
    with pytest.raises(ConfigError, match="keep_initial=False"), adaptlab.disabled(model):
        pass
    assert adaptlab.active(model) == "default"
    adaptlab.remove(model)  # still removable: its trained weights stay in place
    assert not any(".adaptlab." in n for n, _ in model.named_parameters())


def test_remove_keeps_what_ran() -> None:
    model = tiny_model("bert")
    adaptlab.adapt(model, "full")
    train_steps(model)
    trained = logits(model)
    adaptlab.remove(model)
    assert torch.equal(logits(model), trained)
    assert all(p.requires_grad for p in model.parameters())
