"""Knowledge attribution of FFN intermediate neurons by batched integrated gradients.

Dai et al., "Knowledge Neurons in Pretrained Transformers" (slides, eq. 4-5): with
P_x(w) = p(y* | x, w_i^(l) = w) the probability of the correct answer when neuron i of layer l
is set to w, Attr(w_i^(l)) = w̄ ∫_0^1 dP_x(α w̄)/dw dα, computed as the Riemann sum
(w̄ / m) Σ_{k=1..m} dP_x((k/m) w̄)/dw with baseline 0. The activation-value baseline is
Attr_base(w_i^(l)) = w̄_i^(l).

For one layer the m scaled copies run as one batch (a pre-hook replaces that layer's
activation at the answer position by α_k w̄ in row k); several layers share a batch, each in
its own rows. Parameters record no gradients; the LM head runs on the answer position only and
the softmax's derivative is taken in closed form there; a causal LM reads the prompt once and
then only the answer position (its key/value cache repeated over the batch), since nothing
before that position depends on the scaled activation.
"""

from __future__ import annotations

import copy
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any

import torch

from adaptlab.errors import ConfigError
from adaptlab.knowledge.hooks import (
    answer_logits,
    captured_activations,
    frozen_parameters,
    head_input,
    lm_head,
    replaced_activations,
)
from adaptlab.knowledge.lm import KnowledgeLM
from adaptlab.knowledge.prompts import TokenQuery, token_queries

DEFAULT_STEPS = 20
LAYERS_PER_BATCH = 8


@dataclass
class Attribution:
    """Neuron scores (layers, neurons) for one prompt and answer.

    `scores` is integrated gradients, `activations` the activation-value baseline; both are
    means over the answer's tokens. `probability` is the answer's probability (the product of
    its tokens' probabilities, teacher-forced) in the unmodified model.
    """

    scores: torch.Tensor
    activations: torch.Tensor
    probability: float


@dataclass
class _Clean:
    activations: torch.Tensor  # (layers, neurons) at the answer position
    probability: float
    past: Any  # the causal LM's cache of the tokens before the answer position, or None
    ids: torch.Tensor  # what the scaled batch reads: the last token (causal) or the whole prompt
    position: int  # the answer position within `ids`


def _clean_pass(lm: KnowledgeLM, query: TokenQuery) -> _Clean:
    """The unmodified model's activations and answer probability (and a causal LM's cache)."""
    ids, position, past = query.input_ids[None], query.position, None
    with torch.no_grad():
        if lm.kind == "causal" and position > 0:
            if position != ids.shape[1] - 1:
                raise ConfigError("a causal LM's answer position must be the prompt's last token")
            past = lm.model(input_ids=ids[:, :position], use_cache=True).past_key_values
            ids, position = ids[:, position:], 0
        with captured_activations(lm, position) as captured:
            logits = answer_logits(lm, ids, position, copy.deepcopy(past))
    probability = logits.softmax(-1)[0, query.target].item()
    return _Clean(torch.cat(captured), probability, past, ids, position)


def token_attribution(
    lm: KnowledgeLM,
    query: TokenQuery,
    steps: int = DEFAULT_STEPS,
    layers: list[int] | None = None,
    layers_per_batch: int | None = LAYERS_PER_BATCH,
) -> Attribution:
    """Integrated gradients of one answer token's probability for every neuron of `layers`.

    Rows of layers not in `layers` are zero. `layers_per_batch` bounds the batch at
    `layers_per_batch * steps` rows (None: all layers in one batch).
    """
    if steps < 1:
        raise ConfigError(f"integrated gradients need at least 1 step, got {steps}")
    clean = _clean_pass(lm, query)
    chosen = list(range(lm.num_layers)) if layers is None else layers
    group = layers_per_batch or len(chosen)
    scores = torch.zeros_like(clean.activations)
    alphas = torch.arange(1, steps + 1, dtype=clean.activations.dtype) / steps  # k/m, eq. 5
    for start in range(0, len(chosen), group):
        part = chosen[start : start + group]
        grads = _gradients(lm, clean, query.target, part, alphas)
        for layer, grad in zip(part, grads, strict=True):
            scores[layer] = clean.activations[layer] * grad.sum(0) / steps  # eq. 5
    return Attribution(scores, clean.activations, clean.probability)


def _gradients(
    lm: KnowledgeLM, clean: _Clean, target: int, layers: list[int], alphas: torch.Tensor
) -> tuple[torch.Tensor, ...]:
    """dP/dw at each α_k w̄, per layer (steps, neurons): one batch, one backward pass."""
    steps = len(alphas)
    rows = steps * len(layers)
    past = clean.past
    if past is not None:
        past = copy.deepcopy(past)
        past.batch_repeat_interleave(rows)
    scaled = [
        (alphas[:, None] * clean.activations[layer][None]).requires_grad_(True) for layer in layers
    ]
    with torch.enable_grad(), frozen_parameters(lm.model), ExitStack() as stack:
        for g, layer in enumerate(layers):
            block = slice(g * steps, (g + 1) * steps)
            module = lm.ffn_out[layer]
            stack.enter_context(replaced_activations(module, clean.position, block, scaled[g]))
        hidden = head_input(lm, clean.ids.expand(rows, -1), clean.position, past)
        head = lm_head(lm)
        weight = head.weight
        with torch.no_grad():  # dP_t/dh = P_t (W_t - softmax(z) W), z = W h + b
            logits = hidden @ weight.T  # in place from here on: V-sized rows
            if head.bias is not None:
                logits += head.bias
            exp = logits.sub_(logits.amax(-1, keepdim=True)).exp_()
            total = exp.sum(-1, keepdim=True)
            expected = (exp @ weight).div_(total)
            grad_hidden = (exp[:, target, None] / total) * (weight[target] - expected)
        return torch.autograd.grad(hidden, scaled, grad_outputs=grad_hidden)


def attribute(
    lm: KnowledgeLM,
    template: str,
    subject: str,
    answer: str,
    steps: int = DEFAULT_STEPS,
    layers_per_batch: int | None = LAYERS_PER_BATCH,
) -> Attribution:
    """Attribution of a filled template's answer; multi-token answers average their tokens."""
    parts = [
        token_attribution(lm, query, steps, layers_per_batch=layers_per_batch)
        for query in token_queries(lm, template, subject, answer)
    ]
    probability = 1.0
    for part in parts:
        probability *= part.probability
    return Attribution(
        torch.stack([p.scores for p in parts]).mean(0),
        torch.stack([p.activations for p in parts]).mean(0),
        probability,
    )
