"""The MAM adapter: prefix at attention + scaled parallel adapter at the FFN, one method."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from tiny_models import ARCHS, HEADS, HIDDEN, LAYERS, tiny_inputs, tiny_model, train_steps

import adaptlab
from adaptlab.errors import ConfigError

SMALL = {"prefix_length": 4, "hidden_size": 16, "reparam_hidden": 8}


def logits(model: torch.nn.Module) -> torch.Tensor:
    with torch.no_grad():
        return model(**tiny_inputs()).logits


@pytest.mark.parametrize("arch", [a for a in ARCHS if a != "mpnet"])
def test_trainable_count_is_prefix_plus_parallel(arch: str) -> None:
    d, layers = HIDDEN, LAYERS
    kv = d // HEADS * 2 if arch == "llama" else d
    handle = adaptlab.adapt(tiny_model(arch), "mam", **SMALL)
    counts = handle.parameter_counts()
    prefix = 4 * d + (d + 1) * 8 + (8 + 1) * layers * 2 * kv
    parallel = layers * (2 * d * 16 + 16 + d)
    assert counts["mam"] == prefix + parallel
    assert set(handle.groups) == {"mam", "head"}


def test_paper_defaults_and_one_line_errors() -> None:
    config = adaptlab.make_config("mam")
    assert (config.prefix_length, config.hidden_size, config.scale) == (30, 512, 4.0)
    with pytest.raises(ConfigError, match="mam: hidden_size 512 exceeds the FFN width 64"):
        adaptlab.adapt(tiny_model("bert"), "mam")
    with pytest.raises(ConfigError, match="both modify the ffn_out layers"):
        adaptlab.adapt(tiny_model("bert"), ["pfeiffer", {"mam": SMALL}])
    with pytest.raises(ConfigError, match="both modify the attention_prefix layers"):
        adaptlab.adapt(tiny_model("bert"), ["prefix", {"mam": SMALL}])


def test_save_load_exact_with_the_prefix_folded(tmp_path: Path) -> None:
    model = tiny_model("distilbert", head_seed=1)
    adaptlab.adapt(model, "mam", **SMALL)
    train_steps(model, lr=1e-2)
    expected = logits(model)
    adaptlab.save_adapter(model, tmp_path)
    assert adaptlab.read_manifest(tmp_path)["methods"][0]["config"]["reparameterize"] is False
    fresh = tiny_model("distilbert", head_seed=2)
    adaptlab.load_adapter(fresh, tmp_path)
    assert torch.equal(logits(fresh), expected)
