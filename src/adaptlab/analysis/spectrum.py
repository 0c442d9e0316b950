"""The spectrum of one weight update: its singular values, the rank needed to explain a share
of them, its size against the weight, and the intruder dimensions it brings.

- **Effective rank** (Biderman et al. 2024, "LoRA Learns Less and Forgets Less", their spectral
  analysis of ΔW): the smallest r whose r largest singular values of ΔW hold a share q of its
  squared spectrum, sum_{i<=r} s_i^2 >= q sum_i s_i^2. They use q = 0.9 and report full
  fine-tuning's r at 10-100 times the rank of usual LoRA configurations; q = 0.5 and 0.99 are
  given beside it.
- **Intruder dimensions** (Shuttleworth et al. 2024, "LoRA vs Full Fine-tuning: An Illusion of
  Equivalence"): a left singular vector y_j among the top k of the adapted W + ΔW is an
  intruder when its largest cosine similarity with the left singular vectors x_i of W is below
  epsilon, max_i |cos(y_j, x_i)| < epsilon. Defaults: k = 10, as in the authors' released code
  and PEFT's `reduce_intruder_dimension`; epsilon = 0.5, PEFT's default (the paper reports
  counts over a range of epsilon).

Everything is computed in float64 from matrices given as (out, in).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from adaptlab.errors import ConfigError

SHARES = (0.5, 0.9, 0.99)
"""The shares of the squared spectrum an effective rank is given for."""
TOP_K = 10
EPSILON = 0.5
KEPT_VALUES = 64
"""Singular values of ΔW kept in the results (the ranks use all of them)."""


@dataclass(frozen=True)
class UpdateSpectrum:
    """What one ΔW does to one weight matrix W."""

    singular_values: tuple[float, ...]  # of ΔW, largest first, the first KEPT_VALUES
    effective_ranks: dict[str, int]  # share -> rank, e.g. {"0.9": 12}
    relative_norm: float  # ||ΔW||_F / ||W||_F
    intruders: int  # among the top k singular vectors of W + ΔW
    intruder_similarity: tuple[float, ...]  # max_i |cos(y_j, x_i)| for each of the top k

    def to_dict(self) -> dict[str, object]:
        return {
            "singular_values": list(self.singular_values),
            "effective_ranks": dict(self.effective_ranks),
            "relative_norm": self.relative_norm,
            "intruders": self.intruders,
            "intruder_similarity": list(self.intruder_similarity),
        }


def check_intruder_options(top_k: int, epsilon: float) -> None:
    """One line unless k is a positive integer and epsilon in (0, 1]."""
    if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
        raise ConfigError(f"top_k must be a positive integer, got {top_k!r}")
    if not 0 < epsilon <= 1:
        raise ConfigError(f"epsilon must be in (0, 1] (a cosine similarity), got {epsilon!r}")


def effective_rank(singular_values: torch.Tensor, share: float) -> int:
    """The fewest largest singular values holding `share` of the squared spectrum (0 for a zero
    matrix)."""
    squares = singular_values.double().square()
    total = squares.sum()
    if total == 0:
        return 0
    held = torch.cumsum(squares, 0) / total
    return int(torch.searchsorted(held, torch.tensor(share, dtype=held.dtype)).item()) + 1


def intruder_similarity(base: torch.Tensor, adapted: torch.Tensor, top_k: int) -> torch.Tensor:
    """For each of the top `top_k` left singular vectors of `adapted`, its largest |cosine| with
    the left singular vectors of `base`."""
    base_vectors = torch.linalg.svd(base.double(), full_matrices=False).U
    adapted_vectors = torch.linalg.svd(adapted.double(), full_matrices=False).U[:, :top_k]
    return (adapted_vectors.T @ base_vectors).abs().max(dim=1).values


def update_spectrum(
    weight: torch.Tensor, delta: torch.Tensor, top_k: int = TOP_K, epsilon: float = EPSILON
) -> UpdateSpectrum:
    """The spectrum of `delta` (ΔW) applied to `weight` (W), both (out, in)."""
    weight, delta = weight.double(), delta.double()
    singular = torch.linalg.svdvals(delta)
    similarity = intruder_similarity(weight, weight + delta, top_k)
    norm = torch.linalg.matrix_norm(weight)
    return UpdateSpectrum(
        singular_values=tuple(singular[:KEPT_VALUES].tolist()),
        effective_ranks={str(q): effective_rank(singular, q) for q in SHARES},
        relative_norm=float(torch.linalg.matrix_norm(delta) / norm) if norm > 0 else float("inf"),
        intruders=int((similarity < epsilon).sum().item()),
        intruder_similarity=tuple(similarity.tolist()),
    )


def layer_summaries(matrices: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per block and kind (attention, ffn, other): how many matrices changed, their mean
    effective rank at 0.9 and their intruder dimensions in all."""
    grouped: dict[int, dict[str, list[Mapping[str, Any]]]] = {}
    for matrix in matrices:
        grouped.setdefault(matrix["layer"], {}).setdefault(matrix["kind"], []).append(matrix)
    return [
        {
            "layer": layer,
            **{
                kind: {
                    "matrices": len(found),
                    "mean_effective_rank": sum(m["effective_ranks"]["0.9"] for m in found)
                    / len(found),
                    "intruders": sum(m["intruders"] for m in found),
                }
                for kind, found in sorted(grouped[layer].items())
            },
        }
        for layer in sorted(grouped)
    ]
