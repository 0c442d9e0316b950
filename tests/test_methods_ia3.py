"""(IA)3: exact identity at init, merge and unmerge, saving, composition rules."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from tiny_models import ARCHS, tiny_inputs, tiny_model, train_steps

import adaptlab
from adaptlab import Fuse, Stack
from adaptlab.errors import ConfigError


def logits(model: torch.nn.Module) -> torch.Tensor:
    with torch.no_grad():
        return model(**tiny_inputs()).logits


@pytest.mark.parametrize("arch", ARCHS)
def test_identity_at_init_then_merge_round_trip(arch: str) -> None:
    model = tiny_model(arch)
    base = logits(model)
    adaptlab.adapt(model, "ia3")
    assert torch.equal(logits(model), base)  # every scale starts at exactly one
    train_steps(model, lr=5e-2)
    weights = {n: p.detach().clone() for n, p in model.named_parameters()}
    adapted = logits(model)
    assert not torch.allclose(adapted, base)
    adaptlab.merge(model)
    assert (logits(model) - adapted).abs().max().item() <= 1e-5
    assert any(not torch.equal(p, weights[n]) for n, p in model.named_parameters())
    adaptlab.unmerge(model)
    assert (logits(model) - adapted).abs().max().item() <= 1e-5
    with adaptlab.disabled(model):
        assert (logits(model) - base).abs().max().item() <= 1e-5
    for name, param in model.named_parameters():
        assert (param - weights[name]).abs().max().item() <= 1e-5, name


def test_ffn_scale_acts_on_the_output_projection_input() -> None:
    model = tiny_model("bert")
    handle = adaptlab.adapt(model, "ia3", targets=("ffn",))
    layer = model.get_submodule(handle.backbone.blocks[0].ffn_out)
    seen: list[torch.Tensor] = []
    layer.register_forward_pre_hook(lambda m, args: seen.append(args[0]))
    site = handle.backbone.blocks[0].ffn_out
    scale = next(p for n, p in model.named_parameters() if n.startswith(site + ".adaptlab"))
    with torch.no_grad():
        scale.fill_(2.0)
        model(**tiny_inputs())
        doubled = seen[-1]
        adaptlab.set_active(model, None)
        model(**tiny_inputs())
    assert torch.allclose(doubled, 2 * seen[-1])


def test_save_load_exact_and_stacking(tmp_path: Path) -> None:
    model = tiny_model("bert", head_seed=1)
    adaptlab.adapt(model, "ia3")
    train_steps(model, lr=5e-2)
    expected = logits(model)
    adaptlab.save_adapter(model, tmp_path)
    fresh = tiny_model("bert", head_seed=2)
    adaptlab.load_adapter(fresh, tmp_path)
    assert torch.equal(logits(fresh), expected)
    adaptlab.add_adapter(fresh, "task", "ia3", train_head=False)
    adaptlab.set_active(fresh, Stack("default", "task"))
    assert torch.equal(logits(fresh), expected)  # a second (IA)3 at one starts as identity


def test_fuse_refuses_an_input_rewriting_adapter() -> None:
    model = tiny_model("bert")
    adaptlab.add_adapter(model, "a", "ia3")
    adaptlab.add_adapter(model, "b", "pfeiffer")
    with pytest.raises(ConfigError, match="cannot combine per adapter"):
        adaptlab.add_fusion(model, Fuse("a", "b"))


@pytest.mark.parametrize(
    ("options", "message"),
    [({"targets": ("query",)}, "unknown target 'query'"), ({"targets": ()}, "at least one")],
)
def test_bad_options(options: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        adaptlab.adapt(tiny_model("bert"), "ia3", **options)


def test_lora_on_values_clashes_with_ia3() -> None:
    with pytest.raises(ConfigError, match="both modify the value layers"):
        adaptlab.adapt(tiny_model("bert"), "ia3+lora")
    adaptlab.adapt(tiny_model("bert"), ["ia3", {"lora": {"targets": ["query"]}}])
