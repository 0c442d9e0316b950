"""The frozen front of a model (embeddings and leading blocks nothing trains in) runs without
dropout; dropout elsewhere is untouched."""

from __future__ import annotations

import pytest
import torch
from tiny_models import tiny_inputs, tiny_model

import adaptlab


def dropout_at_call(model: torch.nn.Module, names: list[str]) -> dict[str, float]:
    """The probability each named dropout module had when it ran in one training forward."""
    seen: dict[str, float] = {}
    hooks = [
        model.get_submodule(n).register_forward_pre_hook(
            lambda m, args, n=n: seen.__setitem__(n, m.p)
        )
        for n in names
    ]
    model.train()
    with torch.no_grad():
        model(**tiny_inputs())
    for hook in hooks:
        hook.remove()
    return seen


EMBED, BLOCK0, BLOCK1, HEAD = (
    "bert.embeddings.dropout",
    "bert.encoder.layer.0.output.dropout",
    "bert.encoder.layer.1.output.dropout",
    "dropout",
)


@pytest.mark.parametrize(
    ("method", "options", "off", "on", "blocks"),
    [
        ("head", {}, [EMBED, BLOCK0, BLOCK1], [HEAD], 2),
        ("lst", {}, [EMBED, BLOCK0, BLOCK1], [HEAD], 2),
        ("freeze", {"k": 1}, [EMBED, BLOCK0], [BLOCK1, HEAD], 1),
        ("lora", {}, [], [EMBED, BLOCK0, BLOCK1, HEAD], 0),
        ("houlsby", {}, [], [EMBED, BLOCK0, BLOCK1, HEAD], 0),
    ],
)
def test_frozen_front_runs_without_dropout(
    method: str, options: dict, off: list[str], on: list[str], blocks: int
) -> None:
    model = tiny_model("bert")
    handle = adaptlab.adapt(model, method, **options)
    assert handle.state.frozen_blocks == blocks
    seen = dropout_at_call(model, off + on)
    assert all(seen[n] == 0.0 for n in off) and all(seen[n] == 0.1 for n in on)
    assert all(model.get_submodule(n).p == 0.1 for n in off)  # put back after the forward
    adaptlab.set_active(model, None)
    assert all(v == 0.1 for v in dropout_at_call(model, off + on).values())


def test_llama_attention_dropout_rate_is_zero_in_the_frozen_front() -> None:
    model = tiny_model("llama")
    model.config.attention_dropout = 0.3
    for layer in model.model.layers:
        layer.self_attn.attention_dropout = 0.3
    seen: list[float] = []
    attention = model.model.layers[1].self_attn
    attention.register_forward_pre_hook(lambda m, args: seen.append(m.attention_dropout))
    adaptlab.adapt(model, "head")
    model.train()
    with torch.no_grad():
        model(**tiny_inputs())
    assert seen == [0.0] and attention.attention_dropout == 0.3
