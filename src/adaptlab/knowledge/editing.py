"""Update a fact or erase a relation by editing the FFN value slots of knowledge neurons.

Dai et al. (slides, "Updating Facts"): to turn <h, r, t> into <h, r, t'>, each knowledge
neuron's value slot (its column of the FFN output projection) becomes
FFN_i^(val) - λ1 t + λ2 t', with t, t' the word embeddings of the answers (their first tokens).
"Erasing Relations": the value slots of a relation's knowledge neurons are set to 0.
Every edit keeps the original columns and restores them bit for bit.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch

from adaptlab.knowledge.hooks import Neuron
from adaptlab.knowledge.lm import KnowledgeLM

LAMBDA1, LAMBDA2 = 1.0, 8.0


class ValueSlotEdit:
    """A reversible change of value slots: `restore()` puts every touched column back exactly."""

    def __init__(self, lm: KnowledgeLM) -> None:
        self.lm = lm
        self._saved: dict[Neuron, torch.Tensor] = {}

    def slot(self, neuron: Neuron) -> torch.Tensor:
        """The live value slot (hidden,) of `neuron`; its original is saved on first touch."""
        layer, index = neuron
        slots = self.lm.value_slots(layer)
        if neuron not in self._saved:
            self._saved[neuron] = slots[:, index].clone()
        return slots[:, index]

    def restore(self) -> None:
        """Copy every saved column back into its weight."""
        for (layer, index), original in self._saved.items():
            self.lm.value_slots(layer)[:, index] = original
        self._saved.clear()

    @property
    def neurons(self) -> list[Neuron]:
        return list(self._saved)


@contextmanager
def value_slot_edit(lm: KnowledgeLM) -> Iterator[ValueSlotEdit]:
    """A `ValueSlotEdit` restored when the block ends, however it ends."""
    edit = ValueSlotEdit(lm)
    try:
        yield edit
    finally:
        edit.restore()


def word_embedding(lm: KnowledgeLM, token: int) -> torch.Tensor:
    """The input embedding of `token`."""
    table = lm.model.get_input_embeddings()
    assert isinstance(table, torch.nn.Embedding)
    return table.weight.data[token]


def update_fact(
    edit: ValueSlotEdit,
    neurons: list[Neuron],
    old_token: int,
    new_token: int,
    lambda1: float = LAMBDA1,
    lambda2: float = LAMBDA2,
) -> None:
    """FFN_i^(val) <- FFN_i^(val) - λ1 emb(t) + λ2 emb(t') for each neuron (slides, "Updating")."""
    old = word_embedding(edit.lm, old_token)
    new = word_embedding(edit.lm, new_token)
    for neuron in neurons:
        slot = edit.slot(neuron)
        slot.sub_(lambda1 * old).add_(lambda2 * new)


def erase(edit: ValueSlotEdit, neurons: list[Neuron]) -> None:
    """Zero the value slots of `neurons` (slides, "Erasing Relations")."""
    for neuron in neurons:
        edit.slot(neuron).zero_()
