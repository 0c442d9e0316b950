"""SwiGLU MLPs that keep less for the backward pass (`adaptlab.engine.gated_mlp`): the same
outputs and gradients as transformers' own forward, one intermediate-width tensor fewer kept per
MLP, and hooks on the projections still called with what they saw before."""

from __future__ import annotations

import copy

import torch
from torch import nn
from transformers import BertConfig, BertModel, LlamaConfig, LlamaForCausalLM

from adaptlab.engine.gated_mlp import keep_less_in_mlps

BATCH, LENGTH, INTERMEDIATE = 2, 7, 48


def tiny_llama() -> LlamaForCausalLM:
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=64, hidden_size=16, intermediate_size=INTERMEDIATE, num_hidden_layers=2,
        num_attention_heads=2, num_key_value_heads=1,
    )  # fmt: skip
    return LlamaForCausalLM(config)


def loss_and_grads(model: nn.Module, ids: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
    model.zero_grad()
    loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    return loss.detach(), [p.grad.clone() for p in model.parameters() if p.grad is not None]


def test_outputs_and_gradients_are_the_models_own() -> None:
    own = tiny_llama()
    kept = copy.deepcopy(own)
    assert keep_less_in_mlps(kept) == 2
    ids = torch.randint(0, 64, (BATCH, LENGTH), generator=torch.Generator().manual_seed(1))
    loss, grads = loss_and_grads(own, ids)
    kept_loss, kept_grads = loss_and_grads(kept, ids)
    torch.testing.assert_close(kept_loss, loss, rtol=0, atol=1e-6)
    assert len(kept_grads) == len(grads)
    for ours, theirs in zip(kept_grads, grads, strict=True):
        torch.testing.assert_close(ours, theirs, rtol=1e-6, atol=1e-7)


def saved_bytes(mlp: nn.Module, x: torch.Tensor) -> int:
    """Bytes of the distinct storages an MLP's forward keeps for its backward, parameters
    left out."""
    params = {p.untyped_storage().data_ptr() for p in mlp.parameters()}
    kept: dict[int, int] = {}

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in params:
            kept[storage.data_ptr()] = storage.nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        mlp(x)
    return sum(kept.values())


def test_an_mlp_keeps_one_intermediate_tensor_fewer() -> None:
    mlp = tiny_llama().model.layers[0].mlp
    x = torch.randn(BATCH, LENGTH, 16, requires_grad=True)
    before = saved_bytes(mlp, x)
    keep_less_in_mlps(mlp)
    assert before - saved_bytes(mlp, x) == BATCH * LENGTH * INTERMEDIATE * 4  # silu(gate(x))


def test_hooks_on_the_projections_see_what_they_saw() -> None:
    own, kept = tiny_llama(), tiny_llama()
    keep_less_in_mlps(kept)
    seen: dict[str, torch.Tensor] = {}
    for name, model in (("own", own), ("kept", kept)):
        down = model.model.layers[1].mlp.down_proj
        down.register_forward_pre_hook(lambda _, args, name=name: seen.update({name: args[0]}))
        model(input_ids=torch.arange(LENGTH).unsqueeze(0))
    torch.testing.assert_close(seen["kept"], seen["own"], rtol=0, atol=1e-6)


def test_other_mlps_are_left_alone() -> None:
    config = BertConfig(
        hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32
    )
    assert keep_less_in_mlps(BertModel(config)) == 0
