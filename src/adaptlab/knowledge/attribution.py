"""Knowledge attribution of FFN intermediate neurons by batched integrated gradients.

Dai et al., "Knowledge Neurons in Pretrained Transformers" (slides, eq. 4-5): with
P_x(w) = p(y* | x, w_i^(l) = w) the probability of the correct answer when neuron i of layer l
is set to w, Attr(w_i^(l)) = w̄ ∫_0^1 dP_x(α w̄)/dw dα, computed as the Riemann sum
(w̄ / m) Σ_{k=1..m} dP_x((k/m) w̄)/dw with baseline 0. The activation-value baseline is
Attr_base(w_i^(l)) = w̄_i^(l).

For one layer the m scaled copies run as one batch (a pre-hook replaces that layer's
activation at the answer position by α_k w̄ in row k); several layers share a batch, each in
its own rows. The batch starts as one unmodified row and grows where it must: block l appends
layer l's m rows, copies of the unmodified row, which is why the hook can read w̄ there; no
block below l computes them. The unmodified row also gives the answer's probability.
Parameters record no gradients; the LM head runs on the answer position only and the softmax's
derivative is taken in closed form there; a causal LM reads the prompt once, without logits,
and then only the answer position (each block's key/value cache repeated over that block's
rows), since nothing before that position depends on the scaled activation.
"""

from __future__ import annotations

import copy
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any

import torch
from torch.profiler import record_function

from adaptlab.errors import ConfigError
from adaptlab.knowledge.hooks import (
    appended_rows,
    frozen_parameters,
    head_input,
    lm_head,
    scaled_activations,
    without_logits,
)
from adaptlab.knowledge.lm import KnowledgeLM
from adaptlab.knowledge.prompts import TokenQuery, token_queries

DEFAULT_STEPS = 20
LAYERS_PER_BATCH = 8
PHASE = "adaptlab.attribution."
"""Prefix of attribution's profiler labels: prompt (a causal LM's prompt cache), forward, head
(the closed-form derivative) and backward."""


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
class _Prompt:
    ids: torch.Tensor  # what the scaled batch reads: the last token (causal) or the whole prompt
    position: int  # the answer position within `ids`
    past: Any  # the causal LM's cache of the tokens before the answer position, or None
    target: int


@dataclass
class _Batch:
    activations: list[torch.Tensor]  # per layer (neurons,): w̄ at the answer position
    gradients: tuple[torch.Tensor, ...]  # per layer (steps, neurons): dP/dw at α_k w̄
    probability: float  # the answer's probability in the unmodified model


def _prompt(lm: KnowledgeLM, query: TokenQuery) -> _Prompt:
    """A causal LM reads the tokens before the answer position once, into its cache."""
    ids, position, past = query.input_ids[None], query.position, None
    if lm.kind == "causal" and position > 0:
        if position != ids.shape[1] - 1:
            raise ConfigError("a causal LM's answer position must be the prompt's last token")
        with torch.no_grad(), record_function(f"{PHASE}prompt"), without_logits(lm):
            past = lm.model(input_ids=ids[:, :position], use_cache=True).past_key_values
        ids, position = ids[:, position:], 0
    return _Prompt(ids, position, past, query.target)


def token_attribution(
    lm: KnowledgeLM,
    query: TokenQuery,
    steps: int = DEFAULT_STEPS,
    layers: list[int] | None = None,
    layers_per_batch: int | None = LAYERS_PER_BATCH,
) -> Attribution:
    """Integrated gradients of one answer token's probability for every neuron of `layers`.

    Rows of layers not in `layers` are zero; the result is on the CPU, wherever the model is.
    `layers_per_batch` bounds the batch at `1 + layers_per_batch * steps` rows (None: all
    layers in one batch).
    """
    if steps < 1:
        raise ConfigError(f"integrated gradients need at least 1 step, got {steps}")
    chosen = sorted(set(range(lm.num_layers) if layers is None else layers))
    if not chosen or not 0 <= chosen[0] <= chosen[-1] < lm.num_layers:
        raise ConfigError(f"layers to attribute must be among 0..{lm.num_layers - 1}: {layers}")
    prompt = _prompt(lm, query)
    group = layers_per_batch or len(chosen)
    weight = lm.ffn_out[0].weight
    scores = weight.new_zeros(lm.num_layers, lm.num_neurons)
    activations = torch.zeros_like(scores)
    alphas = torch.arange(1, steps + 1, dtype=weight.dtype, device=weight.device) / steps  # eq. 5
    probability = 0.0
    for start in range(0, len(chosen), group):
        part = chosen[start : start + group]
        batch = _batch(lm, prompt, part, alphas)
        probability = batch.probability
        for layer, activation, grad in zip(part, batch.activations, batch.gradients, strict=True):
            activations[layer] = activation
            scores[layer] = activation * grad.sum(0) / steps  # eq. 5
    return Attribution(scores.cpu(), activations.cpu(), probability)


def _batch(lm: KnowledgeLM, prompt: _Prompt, layers: list[int], alphas: torch.Tensor) -> _Batch:
    """dP/dw at each α_k w̄ for each of `layers` (ascending): one batch, one backward pass.

    Row 0 is the unmodified model; block `layers[g]` appends rows 1 + g m .. (g + 1) m.
    """
    steps = len(alphas)
    past = prompt.past
    if past is not None:
        with record_function(f"{PHASE}prompt"):
            past = copy.deepcopy(past)
            for block, cache in enumerate(past.layers):
                cache.batch_repeat_interleave(1 + steps * sum(layer <= block for layer in layers))
    with torch.enable_grad(), frozen_parameters(lm.model), ExitStack() as stack:
        found = []
        for g, layer in enumerate(layers):
            rows = slice(1 + g * steps, 1 + (g + 1) * steps)
            stack.enter_context(appended_rows(lm.blocks[layer], steps))
            module = lm.ffn_out[layer]
            found.append(
                stack.enter_context(scaled_activations(module, prompt.position, rows, alphas))
            )
        with record_function(f"{PHASE}forward"):
            hidden = head_input(lm, prompt.ids, prompt.position, past)
        head = lm_head(lm)
        with torch.no_grad(), record_function(f"{PHASE}head"):
            # dP_t/dh = P_t (W_t - softmax(z) W), z = W h + b
            logits = hidden @ head.weight.T  # in place from here on: V-sized rows
            if head.bias is not None:
                logits += head.bias
            exp = logits.sub_(logits.amax(-1, keepdim=True)).exp_()
            total = exp.sum(-1, keepdim=True)
            expected = (exp @ head.weight).div_(total)
            p_target = exp[:, prompt.target, None] / total
            grad_hidden = p_target * (head.weight[prompt.target] - expected)
        activations, scaled = zip(*(f.tensors() for f in found), strict=True)
        with record_function(f"{PHASE}backward"):
            gradients = torch.autograd.grad(hidden, scaled, grad_hidden)
    return _Batch(list(activations), gradients, p_target[0].item())


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
