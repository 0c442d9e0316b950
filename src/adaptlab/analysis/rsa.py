"""Representational similarity analysis (RSA) of two representations of the same tokens.

paper-effectiveness §2.2 (after Laakso and Cottrell 2000): for each representation the N x N
matrix of pairwise cosine similarities; the score is the Pearson correlation of the two
matrices' flattened upper triangles (diagonal excluded). The matrices are never held whole:
rows are processed in chunks and only running sums are kept, so N = 5000 needs a few tens of
MB whatever the hidden size.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from adaptlab.errors import ConfigError

DEFAULT_CHUNK = 256
"""Rows of the similarity matrices computed at a time."""
_FLAT = 1e-12
"""Below this variance the similarities are constant and a correlation is undefined."""


def rsa(x: torch.Tensor, y: torch.Tensor, *, chunk: int = DEFAULT_CHUNK) -> float:
    """Pearson correlation of the upper triangles of the cosine-similarity matrices of x and y.

    x is (N, d) and y is (N, e): row i of each is token i. A pair of constant similarity
    matrices counts as identical (1.0), one constant against a varying one as 0.0, so the
    score is never NaN.
    """
    if x.ndim != 2 or y.ndim != 2 or x.shape[0] != y.shape[0]:
        raise ConfigError(f"RSA needs (N, d) and (N, e) with one N, got {x.shape} and {y.shape}")
    n = x.shape[0]
    if n < 3:
        raise ConfigError(f"RSA needs at least 3 tokens (2 similarity pairs), got {n}")
    with torch.autocast(x.device.type, enabled=False):  # float32 under any caller's autocast
        return _correlation(F.normalize(x.float(), dim=1), F.normalize(y.float(), dim=1), chunk)


def _correlation(a: torch.Tensor, b: torch.Tensor, chunk: int) -> float:
    """RSA of the unit rows `a` and `b` (float32), `chunk` rows of similarities at a time."""
    n = a.shape[0]
    shift = (_first_mean(a, chunk), _first_mean(b, chunk))  # shifted sums stay exact near 1
    sums = torch.zeros(5, dtype=torch.float64, device=a.device)  # a, b, a², b², ab
    for start in range(0, n - 1, chunk):
        stop = min(start + chunk, n - 1)
        block_a = (a[start:stop] @ a[start:].T).sub_(shift[0]).triu_(1)  # j > i only:
        block_b = (b[start:stop] @ b[start:].T).sub_(shift[1]).triu_(1)  # the rest is 0
        sums += torch.stack(  # per-chunk float32 sums (cascaded), accumulated in float64
            [
                block_a.sum(),
                block_b.sum(),
                block_a.square().sum(),
                block_b.square().sum(),
                (block_a * block_b).sum(),
            ]
        ).double()
    pairs = n * (n - 1) / 2
    mean_a, mean_b, mean_aa, mean_bb, mean_ab = (sums / pairs).tolist()
    var_a, var_b = mean_aa - mean_a**2, mean_bb - mean_b**2
    if var_a <= _FLAT or var_b <= _FLAT:
        return 1.0 if var_a <= _FLAT and var_b <= _FLAT else 0.0
    correlation = (mean_ab - mean_a * mean_b) / math.sqrt(var_a * var_b)
    return max(-1.0, min(1.0, correlation))


def _first_mean(unit: torch.Tensor, chunk: int) -> float:
    """Mean similarity of the first rows' pairs: a shift close to the overall mean."""
    rows = unit[: min(chunk, unit.shape[0] - 1)]
    block = rows @ unit.T
    keep = torch.ones_like(block, dtype=torch.bool).triu(1)
    return float(block[keep].double().mean())
