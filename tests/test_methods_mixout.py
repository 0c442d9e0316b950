"""Mixout for full fine-tuning (`full` with mixout=p): the mixed weight, dropout off, saving."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from tiny_models import tiny_inputs, tiny_model, train_steps

import adaptlab
from adaptlab.errors import ConfigError
from adaptlab.methods.full import Mixout


def logits(model: torch.nn.Module) -> torch.Tensor:
    with torch.no_grad():
        return model(**tiny_inputs()).logits


def test_mixed_weight_keeps_or_rescales_whole_input_units() -> None:
    torch.manual_seed(0)
    u, w = torch.randn(6, 400), torch.randn(6, 400)
    module = Mixout(u, 0.9).train()
    mixed = module.replace_weight(w)
    rescaled = u + (w - u) / 0.1
    kept = torch.isclose(mixed, rescaled).all(dim=0)
    fell_back = torch.equal(mixed[:, ~kept], u[:, ~kept])
    assert fell_back and 0 < int(kept.sum()) < 400  # one mask per input unit, shared by its row
    draws = torch.stack([module.replace_weight(w) for _ in range(2000)])
    assert (draws.mean(0) - w).abs().mean().item() < 0.5  # unbiased: E = w
    assert module.eval().replace_weight(w) is w


def test_starts_at_the_base_and_turns_dropout_off() -> None:
    model = tiny_model("bert")
    base = logits(model)
    dropout = model.get_submodule("bert.encoder.layer.0.output.dropout")
    seen: list[float] = []
    dropout.register_forward_pre_hook(lambda m, args: seen.append(m.p))
    adaptlab.adapt(model, "full", mixout=0.9)
    model.train()
    assert torch.equal(logits(model), base)  # w = u, so every mixed weight is u; no dropout
    assert seen[-1] == 0.0 and dropout.p == 0.1  # off while it runs, put back after


def test_trains_the_weights_and_never_the_pretrained_values(tmp_path: Path) -> None:
    model = tiny_model("llama", head_seed=1)
    base = logits(model)
    handle = adaptlab.adapt(model, "full", mixout=0.5)
    assert handle.parameter_counts()["trainable"] == handle.parameter_counts()["total"]
    targets = [m for m in model.modules() if isinstance(m, Mixout)]
    assert len(targets) == 2 * 7  # q, k, v, o, gate, up, down in each of 2 blocks; not the head
    before = [m.pretrained.clone() for m in targets]
    train_steps(model, lr=1e-2)
    assert all(torch.equal(m.pretrained, b) for m, b in zip(targets, before, strict=True))
    adapted = logits(model)
    assert not torch.allclose(adapted, base)
    with adaptlab.disabled(model):
        assert torch.equal(logits(model), base)
    adaptlab.save_adapter(model, tmp_path)
    assert adaptlab.read_manifest(tmp_path)["methods"][0]["config"] == {"mixout": 0.5}
    fresh = tiny_model("llama", head_seed=2)
    adaptlab.load_adapter(fresh, tmp_path)
    assert torch.equal(logits(fresh), adapted)


def test_without_keep_initial_the_pretrained_values_are_its_own_copy() -> None:
    model = tiny_model("bert")
    adaptlab.adapt(model, "full", mixout=0.9, keep_initial=False)
    module = next(m for m in model.modules() if isinstance(m, Mixout))
    before = module.pretrained.clone()
    train_steps(model, lr=1e-2)
    assert torch.equal(module.pretrained, before)


@pytest.mark.parametrize("value", [1.0, -0.1, True])
def test_bad_probability(value: object) -> None:
    with pytest.raises(ConfigError, match="mixout"):
        adaptlab.adapt(tiny_model("bert"), {"full": {"mixout": value}})
