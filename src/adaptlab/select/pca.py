"""Principal-component reduction shared by the estimators that fit Gaussians (NLEEP, GBC)."""

from __future__ import annotations

import numpy as np

from adaptlab.select.base import Floats, centred


def pca(x: Floats, *, variance: float = 1.0, max_dims: int | None = None) -> Floats:
    """Centred `x` projected on its top components: enough to keep `variance` of the total,
    at most `max_dims`; zero columns are dropped, so constant features give n x 0."""
    z = centred(x)
    n, d = z.shape
    small = z.T @ z if n > d else z @ z.T
    values, vectors = np.linalg.eigh(small)
    order = np.argsort(values)[::-1]
    values, vectors = np.maximum(values[order], 0.0), vectors[:, order]
    total = values.sum()
    if total <= 0:
        return np.zeros((n, 0))
    keep = int(np.searchsorted(np.cumsum(values) / total, variance - 1e-12) + 1)
    keep = min(keep, int((values > total * 1e-12).sum()), max_dims or d)
    if n > d:
        return z @ vectors[:, :keep]
    return vectors[:, :keep] * np.sqrt(values[:keep])  # the same scores from the n x n side
