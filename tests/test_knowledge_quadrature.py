"""Quadrature rules of the attribution integral: the slides' Riemann sum and the adaptive rule."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest
import torch

from adaptlab.errors import ConfigError
from adaptlab.knowledge.quadrature import (
    AdaptiveLobatto,
    PathIntegral,
    check_rule,
    path_integral,
    riemann,
)

Integrand = Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor]]
"""alphas -> (h, P): h (len, dims) whose sum over dims is P's derivative."""


def _integrate(integral: PathIntegral, h: Integrand, tolerance: float) -> tuple[torch.Tensor, int]:
    """Feed `h` to the integral until it asks for nothing more."""
    evaluations = 0
    while nodes := integral.pending():
        values, probabilities = h(torch.tensor(nodes, dtype=torch.float64))
        integral.add(nodes, values, probabilities.tolist())
        evaluations += len(nodes)
        integral.refine(tolerance)
    return integral.value(), evaluations


def _polynomial(a: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    values = torch.stack([a**7, 3 * a**2 - a, torch.ones_like(a)], dim=1)
    return values, a**8 / 8 + a**3 - a**2 / 2 + a


def test_riemann_is_the_slides_right_sum() -> None:
    rule = riemann(4)
    assert rule.nodes == (0.25, 0.5, 0.75, 1.0) and rule.weights == (0.25,) * 4
    value, evaluations = _integrate(path_integral("riemann", 4), _polynomial, 1e-9)
    expected = _polynomial(torch.tensor(rule.nodes, dtype=torch.float64))[0].sum(0) / 4
    torch.testing.assert_close(value, expected)
    assert evaluations == 4
    assert len(path_integral("riemann").pending()) == 20


def _cubic(a: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    values = torch.stack([a**3, 1 - a], dim=1)
    return values, a**4 / 4 + a - a**2 / 2


def test_adaptive_rule_takes_simpsons_three_nodes_where_they_pass() -> None:
    exact = torch.tensor([1 / 4, 1 / 2], dtype=torch.float64)
    value, evaluations = _integrate(AdaptiveLobatto(), _cubic, 0.3)
    assert evaluations == 3  # α = 0, 1/2, 1: Simpson's rule is exact for cubics
    torch.testing.assert_close(value, exact)
    # its estimate (against the trapezoid) is cautious: a tighter tolerance adds Lobatto's nodes
    value, evaluations = _integrate(AdaptiveLobatto(), _cubic, 0.1)
    assert evaluations == 5
    torch.testing.assert_close(value, exact)


def test_adaptive_rule_is_exact_for_degree_seven_on_its_first_five_nodes() -> None:
    exact = torch.tensor([1 / 8, 0.5, 1.0], dtype=torch.float64)
    value, evaluations = _integrate(AdaptiveLobatto(), _polynomial, 0.1)
    assert evaluations == 5  # Simpson's 3 fail on α^7, Lobatto's 5 (3 of them reused) pass
    torch.testing.assert_close(value, exact)
    # its error estimate (against Simpson's rule) is cautious: a tight tolerance halves
    value, evaluations = _integrate(AdaptiveLobatto(), _polynomial, 1e-3)
    assert evaluations > 5
    torch.testing.assert_close(value, exact)


def _switch(width: float) -> Integrand:
    """A logistic switch of P at α = 0.37 (SmolLM2's layer 0 switches its answer on so)."""

    def h(a: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        s = torch.sigmoid((a - 0.37) / width)
        return (s * (1 - s) / width)[:, None], s

    return h


@pytest.mark.parametrize("width", [0.04, 0.01, 0.001])
def test_adaptive_rule_refines_where_the_integrand_switches(width: float) -> None:
    exact = torch.sigmoid(torch.tensor(0.63 / width)) - torch.sigmoid(torch.tensor(-0.37 / width))
    integral = AdaptiveLobatto()
    value, evaluations = _integrate(integral, _switch(width), 1e-3)
    assert abs(value.item() - exact.item()) < 1e-3
    assert 5 < evaluations < 150
    narrow = [i for i in integral._accepted if i.end - i.start < 1 / 16]
    assert narrow and all(0.2 <= i.start < i.end <= 0.55 for i in narrow)  # around the switch
    if width <= 0.01:  # narrower than the m = 20 sum's spacing: it misses the switch
        riemann_value, _ = _integrate(riemann(20), _switch(width), 1e-3)
        assert abs(riemann_value.item() - exact.item()) > 1e-2


def _passes(integral: PathIntegral, h: Integrand, tolerance: float, ahead: int = 0) -> int:
    """How many times the integral asks for nodes (passes over the model), `ahead` levels of
    refinement sampled in advance."""
    passes = 0
    while nodes := integral.pending(ahead):
        values, probabilities = h(torch.tensor(nodes, dtype=torch.float64))
        integral.add(nodes, values, probabilities.tolist())
        integral.refine(tolerance)
        passes += 1
    return passes


@pytest.mark.parametrize("width", [0.04, 0.001])
def test_lookahead_gives_the_same_sum_in_fewer_passes(width: float) -> None:
    plain, one, three = AdaptiveLobatto(), AdaptiveLobatto(), AdaptiveLobatto()
    passes = [
        _passes(i, _switch(width), 1e-3, ahead) for i, ahead in ((plain, 0), (one, 1), (three, 3))
    ]
    assert passes[0] > passes[1] > passes[2]
    for ahead in (one, three):
        assert [(i.start, i.end, i.level) for i in ahead._accepted] == [
            (i.start, i.end, i.level) for i in plain._accepted
        ]
        torch.testing.assert_close(ahead.value(), plain.value(), rtol=1e-12, atol=1e-15)
    smooth = AdaptiveLobatto()
    assert _passes(smooth, _cubic, 0.3, ahead=1) == 1  # Simpson's and Lobatto's nodes at once
    torch.testing.assert_close(smooth.value(), torch.tensor([1 / 4, 1 / 2], dtype=torch.float64))


def test_adaptive_rule_stops_at_its_depth_limit() -> None:
    def jump(a: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return (a > 1 / math.pi).double()[:, None], (a - 1 / math.pi).clamp(min=0)

    value, evaluations = _integrate(AdaptiveLobatto(max_depth=3), jump, 1e-12)
    assert evaluations <= 5 + 3 * 2 * 6  # at most two intervals halved per level
    assert abs(value.item() - (1 - 1 / math.pi)) < 0.1


@pytest.mark.parametrize(
    ("rule", "steps", "tolerance", "message"),
    [
        ("simpson", None, None, "unknown quadrature 'simpson'; choose adaptive or riemann"),
        ("adaptive", 20, None, "steps apply to the riemann quadrature"),
        ("riemann", 0, None, "steps must be a whole number from 1 to 4096, got 0"),
        ("riemann", 10**6, None, "from 1 to 4096, got 1000000"),
        ("riemann", True, None, "got True"),
        ("riemann", 2.5, None, "got 2.5"),
        ("riemann", 20, 1e-3, "a tolerance applies to the adaptive quadrature"),
        ("adaptive", None, 0.0, "tolerance must be above 0 and below 1, got 0.0"),
        ("adaptive", None, math.nan, "tolerance must be above 0 and below 1, got nan"),
        ("adaptive", None, 1.0, "below 1, got 1.0"),
        ("adaptive", None, "0.1", "tolerance must be a number, got '0.1'"),
    ],
)
def test_bad_rules_are_one_line_errors(
    rule: str, steps: object, tolerance: object, message: str
) -> None:
    with pytest.raises(ConfigError) as error:
        check_rule(rule, steps, tolerance)  # type: ignore[arg-type]
    assert message in str(error.value) and "\n" not in str(error.value)
