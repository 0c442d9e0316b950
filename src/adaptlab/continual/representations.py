"""Sentence representations for representation distillation: the hidden states of chosen
layers averaged over each example's real tokens, for the student (from a batch's hidden
states) and for the teacher (once per stage, cached).

The teacher is the model as the stage begins. Its representations of every training example
of the stage are computed once, in evaluation mode and without gradient, and kept on the CPU:
(layers, examples, width) floats, 1.5 MB per layer for 1,000 examples of width 384. Token-level
states would be (tokens per example) times more, 200 MB per layer at 128 tokens, so both the
cache and the loss use the mean over tokens (the pooling CoDIR uses for its contrastive
distillation of intermediate representations, Sun et al. 2020).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import torch

from adaptlab.continual.labelled_run import HiddenStates, StageRun
from adaptlab.engine.batches import batches

Layers = Literal["last", "all"]
"""The last block's output, or every block's output (the embedding output is never used)."""


def layer_indices(which: Layers, states: int) -> list[int]:
    """Indices into a model's `states` hidden states (embedding output first) for `which`."""
    return [states - 1] if which == "last" else list(range(1, states))


def mean_over_tokens(layers: Sequence[torch.Tensor], mask: torch.Tensor) -> torch.Tensor:
    """(layers, rows, width): each (rows, tokens, width) layer averaged over the unmasked
    tokens of each row."""
    weights = mask.to(layers[0].dtype)
    weights = weights / weights.sum(dim=1, keepdim=True).clamp(min=1.0)
    return torch.stack([torch.einsum("btd,bt->bd", layer, weights) for layer in layers])


def student_representations(
    hidden: HiddenStates, which: Layers, positions: Sequence[int]
) -> torch.Tensor:
    """(layers, rows, width): the student's pooled states of `which` layers for the batch rows
    at `positions` (with gradient)."""
    chosen = torch.tensor(list(positions), device=hidden.mask.device)
    layers = layer_indices(which, len(hidden.layers))
    states = [hidden.layers[layer].index_select(0, chosen) for layer in layers]
    return mean_over_tokens(states, hidden.mask.index_select(0, chosen))


@torch.no_grad()
def teacher_representations(run: StageRun, which: Layers) -> torch.Tensor:
    """(layers, examples, width) on the CPU: the pooled states of `which` layers for every
    training example of the stage, by the model as it is now (evaluation mode, no gradient)."""
    model = run.model
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    chunks = []
    try:
        for batch in batches(run.stage.encoder, run.stage.train, run.eval_batch_size, device):
            batch.pop("labels", None)
            states = model(**batch, output_hidden_states=True).hidden_states
            layers = [states[layer] for layer in layer_indices(which, len(states))]
            pooled = mean_over_tokens(layers, batch["attention_mask"])
            chunks.append(pooled.float().cpu())
    finally:
        model.train(was_training)
    return torch.cat(chunks, dim=1)
