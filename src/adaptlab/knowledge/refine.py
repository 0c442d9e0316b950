"""Refining knowledge neurons across the prompts of one fact (Dai et al., slides, 5 steps).

1. n diverse prompts of the fact; 2. attribution scores per prompt; 3. keep neurons scoring
above t * max (t = 0.2); 4. keep those shared by more than p% of prompts (p = 70%);
5. move p by 5% (up when too many, down when too few) until 2 to 5 neurons remain.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import torch

from adaptlab.errors import ConfigError
from adaptlab.knowledge.hooks import Neuron

THRESHOLD = 0.2
SHARE = 0.7
SHARE_STEP = 0.05
MIN_NEURONS, MAX_NEURONS = 2, 5


@dataclass(frozen=True)
class Refined:
    """The knowledge neurons with their mean score over prompts, and the share p that gave them."""

    neurons: list[Neuron]
    scores: list[float]
    share: float
    coarse_counts: list[int]  # neurons above t * max, per prompt


def coarse_neurons(scores: torch.Tensor, threshold: float = THRESHOLD) -> set[Neuron]:
    """Neurons of one prompt scoring above `threshold` times the prompt's highest score (step 3)."""
    top = scores.max()
    if top <= 0:
        return set()
    return {(int(layer), int(index)) for layer, index in (scores > threshold * top).nonzero()}


def refine(
    scores: list[torch.Tensor],
    threshold: float = THRESHOLD,
    share: float = SHARE,
    step: float = SHARE_STEP,
    bounds: tuple[int, int] = (MIN_NEURONS, MAX_NEURONS),
) -> Refined:
    """Steps 3-5 over the (layers, neurons) score tensors of one fact's prompts.

    When moving p jumps over the range (from 6 neurons to 1, or from 1 to 7), the larger set is
    kept and cut to its `bounds[1]` most shared, highest-scoring neurons.
    """
    if not scores:
        raise ConfigError("refining needs the scores of at least one prompt")
    low, high = bounds
    coarse = [coarse_neurons(s, threshold) for s in scores]
    counts = Counter(n for neurons in coarse for n in neurons)
    mean = torch.stack(scores).mean(0)

    def ranked(neurons: list[Neuron]) -> list[Neuron]:
        return sorted(neurons, key=lambda n: (-counts[n], -mean[n].item(), n))

    def shared(p: float) -> list[Neuron]:  # step 4: shared by more than p of the prompts
        return ranked([n for n, c in counts.items() if c > p * len(scores) + 1e-9])

    p, kept = share, shared(share)
    direction = 1 if len(kept) > high else -1 if len(kept) < low else 0
    while direction and 0.0 <= p + direction * step <= 1.0:  # step 5
        candidate = shared(p + direction * step)
        if direction > 0 and len(candidate) < low:
            break
        p, kept = p + direction * step, candidate
        if len(kept) >= low and (direction < 0 or len(kept) <= high):
            break
    kept = kept[:high]
    return Refined(kept, [mean[n].item() for n in kept], round(p, 4), [len(c) for c in coarse])
