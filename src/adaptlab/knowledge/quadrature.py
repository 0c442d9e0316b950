"""Quadrature of integrated gradients' path integral over the scale α in [0, 1].

Attr_i = ∫_0^1 h_i(α) dα with h_i(α) = w̄_i dP(α w̄)/dw_i (Dai et al., slides, eq. 4) is
approximated from h at a few nodes α_k. Each rule here is a `PathIntegral`: it names the nodes
it needs, receives h (and P) there, and may ask for more.

- `riemann`: the slides' right Riemann sum (eq. 5), α_k = k/m, weights 1/m; error of order 1/m.
- `adaptive`: on each interval, Simpson's rule (3 nodes, exact for cubics) and, where its
  error estimate exceeds the tolerance, the 5-point Gauss-Lobatto rule on the same interval
  (2 more nodes, exact for degree 7); where that fails too, the interval is halved and each
  half starts again from Simpson's rule. Smooth layers pass on their first 3 nodes (2 rows:
  α = 1 is the unmodified row); a layer whose P(α) changes abruptly (SmolLM2's layer 0
  switches the answer on over a short stretch of α) is refined where it does. A fixed rule of
  few nodes (Gauss-Legendre, say) is exact on smooth layers too, but misses such a switch.
  Asked for nodes some levels `ahead`, every interval still open also gives the nodes of the
  rules it would move to next (and of the ones after, for more levels), so an interval that
  fails moves several rules on per pass over the model; the same intervals are accepted with
  the same sums, at the price of nodes that may go unused. It pays where a pass costs far more
  than a row: a causal LM with its prompt cached, whose rows are one position each, so that a
  pass mostly reads the weights.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Protocol

import torch

from adaptlab.errors import ConfigError

RULES = ("adaptive", "riemann")
DEFAULT_RULE = "adaptive"
DEFAULT_STEPS = 20
"""The Riemann sum's m when none is given: the slides' m = 20."""
MAX_STEPS = 4096
DEFAULT_TOLERANCE = 3e-2
"""The adaptive rule's target: estimated error of all scores over their norm (the estimate
is cautious: on SmolLM2 and on random models the error measured against a converged
integral is about a hundred times smaller, benchmarks/knowledge_neurons.py)."""
MAX_DEPTH = 8
"""Halvings of [0, 1] the adaptive rule makes at most (intervals of 1/256)."""


@dataclass(frozen=True)
class _Rule:
    """A Gauss-Lobatto rule on [0, 1] and, on the same nodes, the one below it (the estimate)."""

    nodes: tuple[float, ...]
    weights: tuple[float, ...]
    lower: tuple[float, ...]


_SIMPSON = _Rule((0.0, 0.5, 1.0), (1 / 6, 4 / 6, 1 / 6), (1 / 2, 0.0, 1 / 2))
"""3-point Lobatto, Simpson's rule (exact to degree 3); below it the trapezoid rule."""
_LOBATTO = _Rule(
    (0.0, 0.5 - math.sqrt(21) / 14, 0.5, 0.5 + math.sqrt(21) / 14, 1.0),
    (1 / 20, 49 / 180, 16 / 45, 49 / 180, 1 / 20),
    (1 / 6, 0.0, 4 / 6, 0.0, 1 / 6),
)
"""5-point Lobatto (exact to degree 7); below it Simpson's rule on three of its nodes."""
_LEVELS = (_SIMPSON, _LOBATTO)
"""The rules an interval tries in turn before it is halved; each one's nodes hold the last's."""


class PathIntegral(Protocol):
    """∫_0^1 h(α) dα of a vector integrand h, from values at the nodes it asks for."""

    def pending(self, ahead: int = 0) -> list[float]:
        """Nodes α whose values the integral needs next (none when it is done), and those of
        `ahead` levels of refinement after them, for a rule that refines."""
        ...

    def add(self, alphas: list[float], values: torch.Tensor, probabilities: list[float]) -> None:
        """h at `alphas` (rows of `values`) and P there (Σ_i h_i is P's derivative)."""
        ...

    def refine(self, tolerance: float) -> None:
        """Ask for more nodes where the estimated error exceeds `tolerance` (absolute)."""
        ...

    def value(self) -> torch.Tensor:
        """The integral from the values received so far."""
        ...


@dataclass
class FixedRule:
    """Σ_k ω_k h(α_k) over fixed nodes."""

    nodes: tuple[float, ...]
    weights: tuple[float, ...]
    _value: torch.Tensor | None = None

    def pending(self, ahead: int = 0) -> list[float]:
        return list(self.nodes) if self._value is None else []

    def add(self, alphas: list[float], values: torch.Tensor, probabilities: list[float]) -> None:
        assert alphas == list(self.nodes)
        self._value = _tensor(self.weights, values) @ values

    def refine(self, tolerance: float) -> None:
        return None

    def value(self) -> torch.Tensor:
        assert self._value is not None, "the rule's nodes were never evaluated"
        return self._value


def riemann(steps: int) -> FixedRule:
    """The slides' right Riemann sum (eq. 5): α_k = k/m, ω_k = 1/m, k = 1..m."""
    return FixedRule(tuple(k / steps for k in range(1, steps + 1)), (1 / steps,) * steps)


@dataclass
class _Interval:
    start: float
    end: float
    depth: int
    level: int = 0  # index into _LEVELS
    integral: torch.Tensor | None = None
    error: float = math.inf

    @property
    def rule(self) -> _Rule:
        return _LEVELS[self.level]

    def nodes(self) -> list[float]:
        width = self.end - self.start
        return [self.start + width * x for x in self.rule.nodes[:-1]] + [self.end]

    def final(self, max_depth: int) -> bool:
        """Whether the interval is accepted whatever its error (the last rule, at the depth
        limit)."""
        return self.depth >= max_depth and self.level == len(_LEVELS) - 1

    def next(self) -> list[_Interval]:
        """The same interval under the next rule, or its two halves after the last rule."""
        if self.level + 1 < len(_LEVELS):
            return [_Interval(self.start, self.end, self.depth, self.level + 1)]
        middle = (self.start + self.end) / 2
        return [
            _Interval(self.start, middle, self.depth + 1),
            _Interval(middle, self.end, self.depth + 1),
        ]


@dataclass
class AdaptiveLobatto:
    """3- then 5-point Gauss-Lobatto on sub-intervals of [0, 1], halved where needed.

    An interval's error estimate is the larger of two: the norm of the difference between its
    rule's sum and the sum of the rule below it on the same nodes (Simpson against the
    trapezoid, Lobatto against Simpson; cautious: the lower rule is the less accurate), and
    how far the sum over neurons is from P(end) - P(start), which it must equal (completeness,
    Sundararajan et al. 2017, §3): a switch narrow enough to slip between the nodes still
    shows there. Each rule's nodes hold the previous one's, and the two ends and the middle of
    every interval are nodes, so no value is computed twice.
    """

    max_depth: int = MAX_DEPTH
    _samples: dict[float, torch.Tensor] = field(default_factory=dict)
    _probabilities: dict[float, float] = field(default_factory=dict)
    _open: list[_Interval] = field(default_factory=lambda: [_Interval(0.0, 1.0, 0)])
    _accepted: list[_Interval] = field(default_factory=list)

    def pending(self, ahead: int = 0) -> list[float]:
        frontier = list(self._open)
        wanted = {a for interval in frontier for a in interval.nodes()}
        for _ in range(ahead):
            frontier = [n for i in frontier if not i.final(self.max_depth) for n in i.next()]
            wanted.update(a for interval in frontier for a in interval.nodes())
        return sorted(wanted - self._samples.keys())

    def add(self, alphas: list[float], values: torch.Tensor, probabilities: list[float]) -> None:
        self._samples.update(zip(alphas, values, strict=True))
        self._probabilities.update(zip(alphas, probabilities, strict=True))
        for interval in self._open:
            self._evaluate(interval)

    def refine(self, tolerance: float) -> None:
        queue, self._open = list(self._open), []
        while queue:
            interval = queue.pop(0)
            width = interval.end - interval.start
            if interval.integral is None:
                self._open.append(interval)
            elif interval.error <= tolerance * width or interval.final(self.max_depth):
                self._accepted.append(interval)
            else:
                following = interval.next()
                for ahead in following:
                    self._evaluate(ahead)  # where the lookahead sampled its nodes already
                queue.extend(following)

    def _evaluate(self, interval: _Interval) -> None:
        """The interval's sum and error estimate, once every one of its nodes has a value."""
        if interval.integral is not None or not all(a in self._samples for a in interval.nodes()):
            return
        samples = torch.stack([self._samples[a] for a in interval.nodes()])
        width = interval.end - interval.start
        integral = width * (_tensor(interval.rule.weights, samples) @ samples)
        lower = width * (_tensor(interval.rule.lower, samples) @ samples)
        change = self._probabilities[interval.end] - self._probabilities[interval.start]
        interval.integral = integral
        interval.error = max(float((integral - lower).norm()), abs(float(integral.sum()) - change))

    def value(self) -> torch.Tensor:
        parts = [i.integral for i in (*self._accepted, *self._open) if i.integral is not None]
        assert parts, "the rule's nodes were never evaluated"
        return torch.stack(parts).sum(0)


def _tensor(values: tuple[float, ...], like: torch.Tensor) -> torch.Tensor:
    return torch.tensor(values, dtype=like.dtype, device=like.device)


def path_integral(rule: str = DEFAULT_RULE, steps: int | None = None) -> PathIntegral:
    """A new integral by rule name; `steps` is the Riemann sum's m (the adaptive rule has none)."""
    check_rule(rule, steps)
    if rule == "adaptive":
        return AdaptiveLobatto()
    return riemann(DEFAULT_STEPS if steps is None else steps)


def check_rule(rule: str, steps: int | None = None, tolerance: float | None = None) -> None:
    """One line naming what is wrong with a rule, its steps (riemann) or tolerance (adaptive)."""
    if rule not in RULES:
        raise ConfigError(f"unknown quadrature {rule!r}; choose {' or '.join(RULES)}")
    if steps is not None:
        if rule != "riemann":
            raise ConfigError("steps apply to the riemann quadrature; adaptive picks its nodes")
        if isinstance(steps, bool) or not isinstance(steps, int) or not 1 <= steps <= MAX_STEPS:
            raise ConfigError(f"steps must be a whole number from 1 to {MAX_STEPS}, got {steps!r}")
    if tolerance is not None:
        if rule != "adaptive":
            raise ConfigError("a tolerance applies to the adaptive quadrature, not to riemann")
        if isinstance(tolerance, bool) or not isinstance(tolerance, int | float):
            raise ConfigError(f"tolerance must be a number, got {tolerance!r}")
        if not 0 < tolerance < 1:
            raise ConfigError(f"tolerance must be above 0 and below 1, got {tolerance!r}")
