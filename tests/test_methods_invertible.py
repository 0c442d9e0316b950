"""MAD-X's invertible adapters: identity at init, an exact inverse before the output embeddings,
and a language adapter trained on a masked LM that loads onto a classifier."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import transformers as T
from tiny_models import ARCHS, tiny_config, tiny_inputs, tiny_model, train_steps
from torch import nn

import adaptlab
from adaptlab import Fuse, Stack
from adaptlab.errors import ConfigError
from adaptlab.methods.invertible import InverseCoupling, InvertibleCoupling

INVERTIBLE = {"pfeiffer": {"invertible": True}}


def masked_lm(arch: str) -> nn.Module:
    torch.manual_seed(0)
    config = tiny_config(arch)
    cls = T.AutoModelForCausalLM if arch == "llama" else T.AutoModelForMaskedLM
    return cls.from_config(config).eval()


def couplings(model: nn.Module) -> list[InvertibleCoupling]:
    return [m for m in model.modules() if isinstance(m, InvertibleCoupling)]


def randomize(model: nn.Module) -> None:
    """Non-zero F and G, so the coupling is no longer the identity."""
    generator = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for coupling in couplings(model):
            for p in coupling.parameters():
                p.copy_(torch.randn(p.shape, generator=generator) * 0.5)


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("build", [tiny_model, masked_lm], ids=["classifier", "lm"])
def test_identity_at_init(arch: str, build) -> None:
    model = build(arch)
    inputs = tiny_inputs()
    with torch.no_grad():
        before = model(**inputs).logits
        adaptlab.adapt(model, INVERTIBLE)
        assert torch.equal(model(**inputs).logits, before)


def test_inverse_undoes_the_coupling() -> None:
    coupling = InvertibleCoupling(32, 2, 0.5, torch.Generator().manual_seed(0))
    nn.init.normal_(coupling.f.up.weight)
    nn.init.normal_(coupling.g.up.weight)
    e = torch.randn(3, 5, 32)
    with torch.no_grad():
        o = coupling.output(e, e, nn.Identity())
        assert not torch.allclose(o, e)
        assert torch.allclose(coupling.inverse(o), e, atol=1e-5)


@pytest.mark.parametrize("arch", ["bert", "electra", "llama"])
def test_output_embeddings_read_the_inverse(arch: str) -> None:
    model = masked_lm(arch)
    decoder = model.get_output_embeddings()
    raw: list[torch.Tensor] = []
    seen: list[torch.Tensor] = []
    decoder.register_forward_pre_hook(lambda module, args: raw.append(args[0]))
    adaptlab.adapt(model, INVERTIBLE)
    decoder.register_forward_hook(lambda module, args, output: seen.append(args[0]))
    randomize(model)
    with torch.no_grad():
        model(**tiny_inputs())
        (coupling,) = couplings(model)
        assert not torch.allclose(seen[-1], raw[-1])
        assert torch.allclose(seen[-1], coupling.inverse(raw[-1]), atol=1e-6)


def test_trainable_count_adds_two_half_width_bottlenecks() -> None:
    plain = adaptlab.adapt(tiny_model("bert"), "pfeiffer").parameter_counts()["trainable"]
    model = tiny_model("bert")
    counts = adaptlab.adapt(model, INVERTIBLE).parameter_counts()["trainable"]
    half, size = 16, 8  # hidden 32: halves of 16, reduced by 2
    assert counts - plain == 2 * (half * size + size + size * half + half)
    assert not any(isinstance(m, InverseCoupling) for m in model.modules())  # no LM head


def test_language_adapter_from_a_masked_lm_loads_onto_a_classifier(tmp_path: Path) -> None:
    lm = masked_lm("bert")
    lm.save_pretrained(tmp_path / "base")
    adaptlab.add_adapter(lm, "lang", INVERTIBLE, train_head=False, seed=1)
    adaptlab.train_adapter(lm, "lang")
    randomize(lm)
    (trained,) = couplings(lm)
    adaptlab.save_adapter(lm, tmp_path / "lang", name="lang")
    classifier = T.AutoModelForSequenceClassification.from_pretrained(tmp_path / "base")
    adaptlab.load_adapter(classifier, tmp_path / "lang", name="lang")
    (loaded,) = couplings(classifier)
    for (name, a), (_, b) in zip(
        trained.named_parameters(), loaded.named_parameters(), strict=True
    ):
        assert torch.equal(a, b), name
    adaptlab.add_adapter(classifier, "task", "pfeiffer", seed=2)
    adaptlab.set_active(classifier, Stack("lang", "task"))
    adaptlab.train_adapter(classifier, "task")
    before = {n: p.detach().clone() for n, p in loaded.named_parameters()}
    train_steps(classifier)
    for name, p in loaded.named_parameters():
        assert torch.equal(p, before[name]), name  # the language adapter stays frozen


def test_fuse_refuses_an_invertible_adapter() -> None:
    model = tiny_model("bert")
    adaptlab.add_adapter(model, "a", INVERTIBLE)
    adaptlab.add_adapter(model, "b", "pfeiffer")
    with pytest.raises(ConfigError, match="cannot combine per adapter"):
        adaptlab.add_fusion(model, Fuse("a", "b"))


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"invertible": "yes"}, "invertible must be true or false"),
        ({"invertible": True, "invertible_reduction_factor": 0}, "invertible_reduction_factor"),
    ],
)
def test_bad_options(options: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        adaptlab.adapt(tiny_model("bert"), "pfeiffer", **options)


def test_odd_embedding_width_is_refused() -> None:
    config = tiny_config("electra")
    config.embedding_size = 15
    model = T.AutoModelForSequenceClassification.from_config(config)
    with pytest.raises(ConfigError, match="width 15 is odd"):
        adaptlab.adapt(model, INVERTIBLE)


def test_default_configs_write_what_they_wrote_before() -> None:
    handle = adaptlab.adapt(tiny_model("bert"), "pfeiffer")
    assert "invertible" not in handle.configs[0].to_dict()
