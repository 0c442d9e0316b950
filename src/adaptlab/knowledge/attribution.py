"""Knowledge attribution of FFN intermediate neurons by batched integrated gradients.

Dai et al., "Knowledge Neurons in Pretrained Transformers" (slides, eq. 4-5): with
P_x(w) = p(y* | x, w_i^(l) = w) the probability of the correct answer when neuron i of layer l
is set to w, Attr(w_i^(l)) = w̄ ∫_0^1 dP_x(α w̄)/dw dα with baseline 0, computed by a
quadrature Σ_k ω_k w̄ dP_x(α_k w̄)/dw (`adaptlab.knowledge.quadrature`: adaptive Gauss-Lobatto
by default, the slides' Riemann sum of eq. 5 on request). The activation-value baseline is
Attr_base(w_i^(l)) = w̄_i^(l).

For one layer the scaled copies run as one batch (a pre-hook replaces that layer's activation
at the answer position by α_k w̄ in row k); several layers share a batch, each in its own
rows. The batch starts as one unmodified row and grows where it must: block l appends layer
l's rows, copies of the unmodified row, which is why the hook can read w̄ there; no block
below l computes them. The unmodified row gives the answer's probability and, since every
layer's activation there is a leaf that records gradients, every layer's α = 1 node. An
adaptive rule asks for more nodes after a pass; the next pass holds only the layers that need
them.
Parameters record no gradients; the LM head runs on the answer position only and the softmax's
derivative is taken in closed form there; a causal LM reads the prompt once, without logits,
and then only the answer position (each block's key/value cache repeated over that block's
rows), since nothing before that position depends on the scaled activation.
"""

from __future__ import annotations

import copy
from contextlib import ExitStack
from dataclasses import dataclass, field
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
from adaptlab.knowledge.quadrature import (
    DEFAULT_RULE,
    DEFAULT_TOLERANCE,
    MAX_DEPTH,
    PathIntegral,
    check_rule,
    path_integral,
)

MAX_ROWS = 192
"""Rows one batch holds at most, unless one layer alone needs more."""
LOOKAHEAD_ROWS = 24
"""Nodes the layers that look more than one level ahead may sample in one pass over a cached
prompt (a pass there mostly reads the weights; of 24 and 48, 24 was the faster at the
GPT-Neo-125M shape on a CPU, 48 on SmolLM2)."""
LOOKAHEAD_LEVELS = 2 * MAX_DEPTH
"""Levels sampled ahead at most: Simpson and Lobatto at every depth."""
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
class _Layer:
    """One layer's part of a batch: its rows' scales (α = 1 is the unmodified row 0)."""

    layer: int
    alphas: list[float]
    activation: torch.Tensor | None = None  # (neurons,) w̄
    gradients: torch.Tensor | None = None  # (1 + rows, neurons) dP/dw at 1, then at alphas
    probabilities: list[float] = field(default_factory=list)  # P at 1, then at alphas


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
    steps: int | None = None,
    layers: list[int] | None = None,
    rule: str = DEFAULT_RULE,
    tolerance: float | None = None,
    max_rows: int = MAX_ROWS,
) -> Attribution:
    """Integrated gradients of one answer token's probability for every neuron of `layers`.

    `rule` is the quadrature (`adaptlab.knowledge.quadrature.RULES`); `steps` the Riemann sum's
    m (20), `tolerance` the adaptive rule's target (the estimated error of all scores over
    their norm, `DEFAULT_TOLERANCE`). Rows of layers not in `layers` are zero; the result is
    on the CPU, wherever the model is. A batch holds at most `max_rows` rows unless one layer
    needs more.
    """
    check_rule(rule, steps, tolerance)
    chosen = sorted(set(range(lm.num_layers) if layers is None else layers))
    if not chosen or not 0 <= chosen[0] <= chosen[-1] < lm.num_layers:
        raise ConfigError(f"layers to attribute must be among 0..{lm.num_layers - 1}: {layers}")
    if isinstance(max_rows, bool) or not isinstance(max_rows, int) or max_rows < 1:
        raise ConfigError(f"max_rows must be a whole number of at least 1, got {max_rows!r}")
    goal = DEFAULT_TOLERANCE if tolerance is None else tolerance
    prompt = _prompt(lm, query)
    integrals = {layer: path_integral(rule, steps) for layer in chosen}
    activations = lm.value_slots(0).new_zeros(lm.num_layers, lm.num_neurons)
    probability = 0.0
    cached, first = prompt.past is not None, True
    while needed := _needed(integrals, cached, first):
        first = False
        for group in _groups(needed, max_rows):
            _batch(lm, prompt, group)
            for part in group:
                assert part.activation is not None and part.gradients is not None
                activations[part.layer] = part.activation
                probability = part.probabilities[0]
                values = part.activation * part.gradients  # h(α) = w̄ dP(α w̄)/dw
                wanted = needed[part.layer]
                rows = [[1.0, *part.alphas].index(a) for a in wanted]
                chances = [part.probabilities[r] for r in rows]
                integrals[part.layer].add(wanted, values[rows], chances)
        scale = torch.stack([i.value() for i in integrals.values()]).norm().item()
        for integral in integrals.values():
            integral.refine(goal * scale / len(integrals) ** 0.5)
    scores = torch.zeros_like(activations)
    for layer, integral in integrals.items():
        scores[layer] = integral.value()
    return Attribution(scores.cpu(), activations.cpu(), probability)


def _needed(
    integrals: dict[int, PathIntegral], cached: bool, first: bool
) -> dict[int, list[float]]:
    """Each unfinished layer's nodes for the next pass (the `first` or a later one).

    With the prompt cached a row is one position and a pass mostly reads the weights, so
    fewer passes with more rows each cost less: every integral also samples one level of
    refinement ahead, and more levels while the nodes of the layers that look further stay
    within `LOOKAHEAD_ROWS`. On a later pass those are all the layers still open; on the first,
    only layer 0, the one whose integrand switches (at GPT-Neo's shape and in SmolLM2, layer 0
    was refined the most on every capital prompt, and most later passes held it alone).
    """
    needed = {layer: nodes for layer, i in integrals.items() if (nodes := i.pending())}
    if not cached:
        return needed
    further = [layer for layer in needed if layer == 0 or not first]
    needed = {layer: integrals[layer].pending(1) for layer in needed}
    for ahead in range(2, LOOKAHEAD_LEVELS + 1) if further else ():
        deeper = {layer: integrals[layer].pending(ahead) for layer in further}
        if sum(len(nodes) for nodes in deeper.values()) > LOOKAHEAD_ROWS:
            break
        needed.update(deeper)
    return needed


def _groups(needed: dict[int, list[float]], max_rows: int) -> list[list[_Layer]]:
    """Consecutive layers packed into batches of at most `max_rows` rows (1 + their alphas)."""
    groups: list[list[_Layer]] = []
    rows = 0
    for layer, nodes in sorted(needed.items()):
        alphas = [a for a in nodes if a != 1.0]
        if not groups or rows + len(alphas) > max_rows:
            groups.append([])
            rows = 1
        groups[-1].append(_Layer(layer, alphas))
        rows += len(alphas)
    return groups


def _batch(lm: KnowledgeLM, prompt: _Prompt, layers: list[_Layer]) -> None:
    """P and dP/dw at α = 1 and at each layer's alphas, into `layers`: one batch, one backward
    pass. Row 0 is the unmodified model; block `layers[g].layer` appends that layer's rows."""
    starts = [1 + sum(len(part.alphas) for part in layers[:g]) for g in range(len(layers))]
    past = prompt.past
    if past is not None:
        with record_function(f"{PHASE}prompt"):
            past = copy.deepcopy(past)
            for block, cache in enumerate(past.layers):
                below = sum(len(part.alphas) for part in layers if part.layer <= block)
                cache.batch_repeat_interleave(1 + below)
    weight = lm.value_slots(0)
    with torch.enable_grad(), frozen_parameters(lm.model), ExitStack() as stack:
        found = []
        for part, start in zip(layers, starts, strict=True):
            alphas = torch.tensor([1.0, *part.alphas], dtype=weight.dtype, device=weight.device)
            rows = [0, *range(start, start + len(part.alphas))]
            if part.alphas:
                stack.enter_context(appended_rows(lm.blocks[part.layer], len(part.alphas)))
            module = lm.ffn_out[part.layer]
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
        tensors = [f.tensors() for f in found]
        with record_function(f"{PHASE}backward"):
            gradients = torch.autograd.grad(hidden, [s for _, s in tensors], grad_hidden)
    probabilities = p_target[:, 0].tolist()
    for part, start, (activation, _), grad in zip(layers, starts, tensors, gradients, strict=True):
        part.activation, part.gradients = activation, grad
        rows = [0, *range(start, start + len(part.alphas))]
        part.probabilities = [probabilities[r] for r in rows]


def attribute(
    lm: KnowledgeLM,
    template: str,
    subject: str,
    answer: str,
    steps: int | None = None,
    rule: str = DEFAULT_RULE,
    tolerance: float | None = None,
) -> Attribution:
    """Attribution of a filled template's answer; multi-token answers average their tokens.

    `steps`, `rule` and `tolerance` as in `token_attribution`.
    """
    parts = [
        token_attribution(lm, query, steps, rule=rule, tolerance=tolerance)
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
