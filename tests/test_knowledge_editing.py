"""Suppress / amplify hooks, value-slot updates and erasure, all restored bit for bit."""

from __future__ import annotations

import random

import pytest
import torch
from test_knowledge_lm import tiny_lm

from adaptlab.knowledge.editing import erase, update_fact, value_slot_edit, word_embedding
from adaptlab.knowledge.effects import random_control
from adaptlab.knowledge.hooks import scaled_neurons
from adaptlab.knowledge.lm import KnowledgeLM

NEURONS = [(0, 3), (1, 5), (1, 60)]


def _state(lm: KnowledgeLM) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in lm.model.state_dict().items()}


def _assert_bit_exact(lm: KnowledgeLM, before: dict[str, torch.Tensor]) -> None:
    after = lm.model.state_dict()
    assert all(torch.equal(after[k], v) for k, v in before.items())


@pytest.mark.parametrize("arch", ["bert", "llama", "gpt2"])
def test_update_moves_only_value_slots_and_restores_exactly(arch: str) -> None:
    lm = tiny_lm(arch)
    before = _state(lm)
    slots = lm.value_slots(1).clone()
    old, new = 2000, 3000
    with value_slot_edit(lm) as edit:
        update_fact(edit, NEURONS, old, new, lambda1=1.0, lambda2=8.0)
        edited = lm.value_slots(1)
        expected = slots[:, 5] - word_embedding(lm, old) + 8 * word_embedding(lm, new)
        torch.testing.assert_close(edited[:, 5], expected)
        assert torch.equal(edited[:, 6], slots[:, 6])
        assert sorted(edit.neurons) == sorted(NEURONS)
    _assert_bit_exact(lm, before)


def test_erase_is_restored_even_after_an_error() -> None:
    lm = tiny_lm("llama")
    before = _state(lm)
    with pytest.raises(RuntimeError), value_slot_edit(lm) as edit:
        erase(edit, NEURONS)
        assert lm.value_slots(0)[:, 3].abs().sum() == 0
        raise RuntimeError("stop")
    _assert_bit_exact(lm, before)


def test_repeated_edits_of_one_neuron_restore_the_first_original() -> None:
    lm = tiny_lm("bert")
    before = _state(lm)
    with value_slot_edit(lm) as edit:
        update_fact(edit, NEURONS, 100, 200)
        update_fact(edit, NEURONS, 300, 400)
        erase(edit, NEURONS[:1])
    _assert_bit_exact(lm, before)


@pytest.mark.parametrize("factor", [0.0, 2.0])
def test_scaling_hooks_scale_the_chosen_neurons_and_go_away(factor: float) -> None:
    lm = tiny_lm("llama")
    ids = torch.tensor([[5, 6, 7, 8]])
    captured = []
    handle = lm.ffn_out[0].register_forward_hook(lambda m, a, o: captured.append(a[0].clone()))
    with torch.no_grad():
        clean = lm.model(input_ids=ids).logits
        with scaled_neurons(lm, NEURONS, factor):
            scaled = lm.model(input_ids=ids).logits
        again = lm.model(input_ids=ids).logits
    handle.remove()
    assert not torch.equal(clean, scaled)
    assert torch.equal(clean, again)
    torch.testing.assert_close(captured[1][..., 3], factor * captured[0][..., 3])
    assert torch.equal(captured[1][..., 4], captured[0][..., 4])


def test_random_control_uses_the_same_layers_and_avoids_the_neurons() -> None:
    control = random_control(NEURONS, 64, random.Random(0))
    assert [layer for layer, _ in control] == [layer for layer, _ in NEURONS]
    assert not set(control) & set(NEURONS) and len(set(control)) == len(NEURONS)
