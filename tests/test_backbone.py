"""Backbone discovery on every promised architecture, and its errors and overrides."""

import pytest
import torch
from tiny_models import ARCHS, FFN, HIDDEN, LAYERS, tiny_model
from torch import nn

from adaptlab import find_backbone
from adaptlab.errors import BackboneError


@pytest.mark.parametrize("arch", ARCHS)
def test_finds_every_part(arch: str) -> None:
    model = tiny_model(arch)
    backbone = find_backbone(model)
    assert backbone.num_blocks == LAYERS
    assert (backbone.hidden_size, backbone.intermediate_size) == (HIDDEN, FFN)
    for block in backbone.blocks:
        for role in ("query", "key", "value", "attention_out", "ffn_out"):
            assert isinstance(model.get_submodule(getattr(block, role)), nn.Linear)
        assert len(block.ffn_in) == (2 if arch == "llama" else 1)
        assert len(block.norms) == 2
    assert backbone.head, "the task head is found"
    assert model.get_input_embeddings() in list(model.get_submodule(backbone.embeddings).modules())


def test_llama_causal_head_is_the_lm_head() -> None:
    backbone = find_backbone(tiny_model("llama", causal=True))
    assert backbone.head == ("lm_head",)
    assert backbone.blocks[0].ffn_out.endswith("mlp.down_proj")


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.qa, self.ka, self.va, self.oa = (nn.Linear(8, 8) for _ in range(4))
        self.up, self.down = nn.Linear(8, 16), nn.Linear(16, 8)


class Odd(nn.Module):
    """A model whose projections have names discovery does not know."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(10, 8)
        self.stack = nn.ModuleList([Block(), Block()])

    def get_input_embeddings(self) -> nn.Module:
        return self.embed


def test_unknown_names_fail_naming_class_modules_and_override() -> None:
    with pytest.raises(BackboneError) as error:
        find_backbone(Odd())
    message = str(error.value)
    assert "Odd" in message and "qa (8->8)" in message and "backbone={'query'" in message
    assert "\n" not in message


def test_overrides_name_the_modules() -> None:
    backbone = find_backbone(
        Odd(), {"query": "qa", "key": "ka", "value": "va", "attention_out": "oa"}
    )
    assert backbone.blocks[1].attention_out == "stack.1.oa"
    assert backbone.blocks[0].ffn_out == "stack.0.down"
    assert backbone.blocks[0].ffn_in == ("stack.0.up",)


def test_override_naming_a_missing_module_fails() -> None:
    with pytest.raises(BackboneError, match="'nope'"):
        find_backbone(Odd(), {"query": "nope"})


def test_no_block_list_fails_clearly() -> None:
    model = nn.Sequential(nn.Linear(4, 4))
    model.get_input_embeddings = lambda: model[0]  # type: ignore[attr-defined]
    with pytest.raises(BackboneError, match="Sequential: found no list of transformer blocks"):
        find_backbone(model)


def test_discovery_does_not_change_outputs() -> None:
    model = tiny_model("bert")
    ids = torch.arange(2, 10).unsqueeze(0)
    before = model(input_ids=ids).logits
    find_backbone(model)
    assert torch.equal(before, model(input_ids=ids).logits)
