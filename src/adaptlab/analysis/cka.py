"""Linear centered kernel alignment (CKA) of two representations of the same tokens.

Kornblith et al. 2019, "Similarity of Neural Network Representations Revisited", eq. 5 (linear
kernel): CKA = ||Y^T X||_F^2 / (||X^T X||_F ||Y^T Y||_F) for column-centred X, Y. The debiased
variant replaces HSIC by its unbiased estimator (Song et al. 2012, eq. 5; used for CKA by
Nguyen et al. 2021, "Do Wide and Deep Networks Learn the Same Things?", §3). Everything is
computed from d x d products in float64, never an N x N Gram matrix.
"""

from __future__ import annotations

import math

import torch

from adaptlab.errors import ConfigError

_FLAT = 1e-12
"""A representation whose centred energy is below this share of its raw energy is constant."""


def linear_cka(x: torch.Tensor, y: torch.Tensor, *, debiased: bool = False) -> float:
    """Linear CKA of x (N, d) and y (N, e), rows being the same N tokens.

    The plain estimate lies in [0, 1]; the debiased one can dip slightly below 0 for unrelated
    representations.

    Two constant representations count as identical (1.0), a constant one against a varying
    one as 0.0, so the result is never NaN. The debiased estimator needs N >= 4.
    """
    if x.ndim != 2 or y.ndim != 2 or x.shape[0] != y.shape[0]:
        raise ConfigError(f"CKA needs (N, d) and (N, e) with one N, got {x.shape} and {y.shape}")
    n = x.shape[0]
    if n < (4 if debiased else 2):
        kind = "debiased CKA needs at least 4" if debiased else "CKA needs at least 2"
        raise ConfigError(f"{kind} tokens, got {n}")
    a, b = _centred(x), _centred(y)
    flat_a, flat_b = a is None, b is None
    if a is None or b is None:
        return 1.0 if flat_a and flat_b else 0.0
    hsic = _unbiased_hsic if debiased else _biased_hsic
    xy, xx, yy = hsic(a, b), hsic(a, a), hsic(b, b)
    if xx <= 0 or yy <= 0:  # the unbiased estimate of a tiny sample can reach zero
        return 0.0
    return min(1.0, xy / math.sqrt(xx * yy))


def _centred(x: torch.Tensor) -> torch.Tensor | None:
    """Column-centred float64 copy, or None when every row is the same."""
    raw = x.double()
    centred = raw - raw.mean(dim=0, keepdim=True)
    energy = float(centred.square().sum())
    if energy <= _FLAT * max(float(raw.square().sum()), 1e-300):
        return None
    return centred


def _biased_hsic(a: torch.Tensor, b: torch.Tensor) -> float:
    """tr(K L) for K = a a^T, L = b b^T (centring constants cancel in CKA)."""
    return float((b.T @ a).square().sum())


def _unbiased_hsic(a: torch.Tensor, b: torch.Tensor) -> float:
    """Song et al. 2012, eq. 5, on K = a a^T and L = b b^T with zeroed diagonals:

    [tr(K~L~) + (1'K~1)(1'L~1) / ((n-1)(n-2)) - 2/(n-2) 1'K~L~1] / (n(n-3)).
    """
    n = a.shape[0]
    diag_k, diag_l = a.square().sum(dim=1), b.square().sum(dim=1)
    trace = (b.T @ a).square().sum() - (diag_k * diag_l).sum()
    row_k = a @ a.sum(dim=0) - diag_k  # K~ 1
    row_l = b @ b.sum(dim=0) - diag_l  # L~ 1
    total = trace + row_k.sum() * row_l.sum() / ((n - 1) * (n - 2)) - 2 * (row_k @ row_l) / (n - 2)
    return float(total / (n * (n - 3)))
