"""Integrated gradients over FFN neurons: completeness, batching, the activation baseline."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import torch
from test_knowledge_lm import MASKED_LMS, tiny_lm

from adaptlab.errors import ConfigError
from adaptlab.knowledge import attribution
from adaptlab.knowledge.attribution import PHASE, _needed, attribute, token_attribution
from adaptlab.knowledge.hooks import pre_hook
from adaptlab.knowledge.lm import KnowledgeLM
from adaptlab.knowledge.prompts import TokenQuery, token_queries
from adaptlab.knowledge.quadrature import MAX_DEPTH, path_integral

PROMPT = ("The capital of [X] is [Y].", "France", "Paris")


@contextmanager
def replaced_activation(
    lm: KnowledgeLM, layer: int, position: int, value: torch.Tensor
) -> Iterator[None]:
    """Layer `layer`'s activation at `position` is `value` in every row."""

    def replace(_: object, args: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
        x = args[0].clone()
        x[:, position] = value
        return (x, *args[1:])

    with pre_hook(lm.ffn_out[layer], replace):
        yield


def _query(lm: KnowledgeLM) -> TokenQuery:
    return token_queries(lm, *PROMPT)[0]


def _probability(lm: KnowledgeLM, query: TokenQuery, layer: int, alpha: float) -> torch.Tensor:
    """P(answer) with layer `layer`'s activation at the answer position scaled by alpha."""
    ids = query.input_ids[None]
    with torch.no_grad():
        clean = {}

        def keep(_: object, args: tuple[torch.Tensor, ...]) -> None:
            clean["a"] = args[0][0, query.position].clone()

        handle = lm.ffn_out[layer].register_forward_pre_hook(keep)
        lm.model(input_ids=ids)
        handle.remove()
        with replaced_activation(lm, layer, query.position, alpha * clean["a"]):
            return lm.model(input_ids=ids).logits[0, query.position].softmax(-1)[query.target]


@pytest.mark.parametrize("arch", ["bert", "llama"])
def test_completeness_error_shrinks_with_steps(arch: str) -> None:
    lm = tiny_lm(arch)
    query = _query(lm)
    for layer in range(lm.num_layers):
        delta = (_probability(lm, query, layer, 1.0) - _probability(lm, query, layer, 0.0)).item()
        errors = [
            abs(token_attribution(lm, query, steps, rule="riemann").scores[layer].sum() - delta)
            for steps in (2, 8, 64)
        ]
        assert errors[2] < errors[1] < errors[0]
        assert errors[2] < 0.02 * abs(delta) + 1e-9
        adaptive = token_attribution(lm, query).scores[layer].sum().item()
        assert abs(adaptive - delta) < 1e-3 * abs(delta) + 1e-12


def _naive(lm: KnowledgeLM, query: TokenQuery, steps: int) -> torch.Tensor:
    """One forward and backward pass per layer and step, on the full prompt, no cache."""
    ids = query.input_ids[None]
    scores = []
    captured: dict[str, torch.Tensor] = {}
    for layer in range(lm.num_layers):

        def keep(_: object, args: tuple[torch.Tensor, ...]) -> None:
            captured["a"] = args[0][0, query.position].detach().clone()

        handle = lm.ffn_out[layer].register_forward_pre_hook(keep)
        with torch.no_grad():
            lm.model(input_ids=ids)
        handle.remove()
        total = torch.zeros_like(captured["a"])
        for k in range(1, steps + 1):
            scaled = (k / steps * captured["a"]).requires_grad_(True)
            with replaced_activation(lm, layer, query.position, scaled):
                logits = lm.model(input_ids=ids, use_cache=False).logits[0, query.position]
            (grad,) = torch.autograd.grad(logits.softmax(-1)[query.target], scaled)
            total += grad
        scores.append(captured["a"] * total / steps)
    return torch.stack(scores)


def _close(found: torch.Tensor, expected: torch.Tensor, rtol: float = 1e-5) -> None:
    """Equal up to `rtol` of the largest score (scores near 0 carry only rounding noise)."""
    assert expected.abs().max() > 0
    torch.testing.assert_close(found, expected, rtol=0, atol=rtol * expected.abs().max().item())


@pytest.mark.parametrize("arch", [*MASKED_LMS, "llama"])
def test_batched_equals_a_per_step_loop(arch: str) -> None:
    lm = tiny_lm(arch)
    query = _query(lm)
    batched = token_attribution(lm, query, 6, rule="riemann").scores
    _close(batched, _naive(lm, query, 6))
    one_layer_per_batch = token_attribution(lm, query, 6, rule="riemann", max_rows=1).scores
    _close(batched, one_layer_per_batch)
    at_one = token_attribution(lm, query, 1, rule="riemann").scores  # only the unmodified row
    _close(at_one, _naive(lm, query, 1))


@pytest.mark.parametrize("arch", ["bert", "llama"])
def test_adaptive_rule_reaches_the_converged_integral(arch: str) -> None:
    lm = tiny_lm(arch)
    query = _query(lm)
    converged = token_attribution(lm, query, 1024, rule="riemann").scores
    midpoint_error = 0.5 / 1024  # the right sum's leading error, of order 1/(2m)
    for tolerance in (1e-2, 1e-4):
        found = token_attribution(lm, query, tolerance=tolerance).scores
        _close(found, converged, rtol=max(tolerance, midpoint_error) * 2)


def test_activation_baseline_and_probability() -> None:
    lm = tiny_lm("llama")
    query = _query(lm)
    result = token_attribution(lm, query)
    captured = {}

    def keep(_: object, args: tuple[torch.Tensor, ...]) -> None:
        captured["a"] = args[0][0, query.position].clone()

    handle = lm.ffn_out[1].register_forward_pre_hook(keep)
    with torch.no_grad():
        logits = lm.model(input_ids=query.input_ids[None]).logits[0, query.position]
    handle.remove()
    torch.testing.assert_close(result.activations[1], captured["a"])
    assert result.probability == pytest.approx(logits.softmax(-1)[query.target].item(), rel=1e-5)


def test_multi_token_answers_average_their_tokens() -> None:
    lm = tiny_lm("llama")
    template, subject = "The capital of [X] is [Y]", "Argentina"
    queries = token_queries(lm, template, subject, "Buenos Aires")
    parts = [token_attribution(lm, q, 4, rule="riemann") for q in queries]
    whole = attribute(lm, template, subject, "Buenos Aires", 4, rule="riemann")
    torch.testing.assert_close(whole.scores, (parts[0].scores + parts[1].scores) / 2)
    assert whole.probability == pytest.approx(parts[0].probability * parts[1].probability)


@pytest.mark.parametrize("arch", ["bert", "llama"])
def test_chosen_layers_match_the_full_run_in_any_order(arch: str) -> None:
    lm = tiny_lm(arch)
    query = _query(lm)
    full = token_attribution(lm, query, 5, rule="riemann")
    top = token_attribution(lm, query, 5, layers=[1, 1], rule="riemann")
    assert top.scores[0].abs().max() == 0
    torch.testing.assert_close(top.scores[1], full.scores[1], rtol=1e-5, atol=1e-10)
    assert top.probability == pytest.approx(full.probability, rel=1e-6)
    with pytest.raises(ConfigError, match=r"among 0\.\.1"):
        token_attribution(lm, query, 5, layers=[2], rule="riemann")


@pytest.mark.parametrize(("arch", "phases"), [("bert", 3), ("llama", 4)])
def test_the_profiler_sees_each_phase(arch: str, phases: int) -> None:
    lm = tiny_lm(arch)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as profiler:
        token_attribution(lm, _query(lm), 3, rule="riemann")
    seen = {event.key for event in profiler.key_averages() if event.key.startswith(PHASE)}
    expected = ["forward", "head", "backward", "prompt"][:phases]
    assert seen == {PHASE + name for name in expected}


def test_cached_prompts_look_ahead_further_on_layer_zero_first() -> None:
    fresh = {layer: path_integral() for layer in range(3)}
    assert _needed(fresh, cached=False, first=True) == {layer: [0.0, 0.5, 1.0] for layer in fresh}
    needed = _needed(fresh, cached=True, first=True)
    assert len(needed[1]) == len(needed[2]) == 5  # Simpson's 3 nodes and Lobatto's 2 more
    assert 5 < len(needed[0]) <= attribution.LOOKAHEAD_ROWS


def test_looking_further_ahead_changes_the_passes_not_the_scores(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    lm = tiny_lm("llama")
    query = _query(lm)
    passes: list[int] = []
    batch = attribution._batch

    def counted(*args: Any) -> None:
        passes[-1] += 1
        batch(*args)

    monkeypatch.setattr(attribution, "_batch", counted)
    scores = []
    # A tolerance far below float32 rounding refines every interval to the depth limit on any
    # CPU, so the passes depend on the algorithm alone: one depth (Simpson, then Lobatto) per
    # pass without looking further, several depths at once on the first pass with it. One
    # layer fills one batch whatever its rows, so passes are not split by `max_rows` either.
    for budget in (0, attribution.LOOKAHEAD_ROWS):  # one rule ahead only, then further
        monkeypatch.setattr(attribution, "LOOKAHEAD_ROWS", budget)
        passes.append(0)
        scores.append(token_attribution(lm, query, layers=[0], tolerance=1e-12).scores)
    assert passes[0] == MAX_DEPTH + 1
    assert passes[1] < passes[0]
    _close(scores[1], scores[0])
