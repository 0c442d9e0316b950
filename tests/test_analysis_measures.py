"""RSA and linear CKA on plain feature matrices: known values, invariances, degenerate input."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from adaptlab.analysis import linear_cka, rsa
from adaptlab.errors import ConfigError


def features(n: int = 40, d: int = 8, seed: int = 0) -> torch.Tensor:
    return torch.randn(n, d, generator=torch.Generator().manual_seed(seed))


def rotation(d: int, seed: int = 5) -> torch.Tensor:
    q, _ = torch.linalg.qr(torch.randn(d, d, generator=torch.Generator().manual_seed(seed)))
    return q


def naive_rsa(x: torch.Tensor, y: torch.Tensor) -> float:
    def upper(m: torch.Tensor) -> np.ndarray:
        unit = m.double() / m.double().norm(dim=1, keepdim=True)
        sims = (unit @ unit.T).numpy()
        return sims[np.triu_indices(len(sims), k=1)]

    return float(np.corrcoef(upper(x), upper(y))[0, 1])


def naive_debiased_cka(x: torch.Tensor, y: torch.Tensor) -> float:
    def hsic(gram_k: np.ndarray, gram_l: np.ndarray) -> float:
        """Song et al. 2012, eq. 5, on whole N x N Gram matrices."""
        n = len(gram_k)
        gram_k, gram_l = gram_k.copy(), gram_l.copy()
        np.fill_diagonal(gram_k, 0)
        np.fill_diagonal(gram_l, 0)
        one = np.ones(n)
        return float(
            (
                np.trace(gram_k @ gram_l)
                + (one @ gram_k @ one) * (one @ gram_l @ one) / ((n - 1) * (n - 2))
                - 2 / (n - 2) * (one @ gram_k @ gram_l @ one)
            )
            / (n * (n - 3))
        )

    gram_k, gram_l = (x.double() @ x.double().T).numpy(), (y.double() @ y.double().T).numpy()
    return hsic(gram_k, gram_l) / math.sqrt(hsic(gram_k, gram_k) * hsic(gram_l, gram_l))


def test_rsa_matches_the_full_matrix_computation_in_any_chunking() -> None:
    x, y = features(), features(d=5, seed=1) + 0.5 * features(d=5, seed=2)
    for chunk in (1, 7, 39, 256):
        assert rsa(x, y, chunk=chunk) == pytest.approx(naive_rsa(x, y), abs=1e-6)


def test_rsa_of_features_with_themselves_is_one_and_ignores_token_scale() -> None:
    x = features()
    assert rsa(x, x) == pytest.approx(1.0, abs=1e-9)
    scaled = x * torch.linspace(0.1, 10, 40)[:, None]  # cosine similarity ignores each norm
    assert rsa(x, scaled) == pytest.approx(1.0, abs=1e-6)
    assert rsa(x, features(seed=9)) < 0.5


def test_rsa_stays_exact_when_all_similarities_are_high() -> None:
    x = features() * 0.3 + 2.0  # every cosine close to 1: shifted sums keep the precision
    y = x + features(seed=3) * 0.1
    assert rsa(x, y) == pytest.approx(naive_rsa(x, y), abs=1e-4)


def test_rsa_of_constant_representations_is_never_nan() -> None:
    ones = torch.ones(10, 4)
    assert rsa(ones, ones) == 1.0
    assert rsa(ones, features(n=10)) == 0.0
    with pytest.raises(ConfigError, match="at least 3 tokens"):
        rsa(features(n=2), features(n=2))
    with pytest.raises(ConfigError, match="one N"):
        rsa(features(n=5), features(n=6))


@pytest.mark.parametrize("debiased", [False, True])
def test_cka_is_invariant_to_rotation_and_isotropic_scaling(debiased: bool) -> None:
    x, y = features(), features(seed=1) + features(seed=2)
    moved = 3.7 * y @ rotation(8)
    assert linear_cka(x, moved, debiased=debiased) == pytest.approx(
        linear_cka(x, y, debiased=debiased), abs=1e-6
    )
    assert linear_cka(x, 0.2 * x @ rotation(8), debiased=debiased) == pytest.approx(1.0, abs=1e-6)
    assert linear_cka(x, features(seed=7), debiased=debiased) < 0.5


def test_cka_is_not_invariant_to_anisotropic_scaling() -> None:
    x = features()
    stretched = x * torch.tensor([10.0, 1, 1, 1, 1, 1, 1, 0.1])
    assert linear_cka(x, stretched) < 0.9


def test_cka_matches_the_gram_matrix_formulas() -> None:
    x, y = features(n=30), features(n=30, d=6, seed=4) + features(n=30, d=6, seed=5)
    centred_x, centred_y = x.double() - x.double().mean(0), y.double() - y.double().mean(0)
    plain = float((centred_y.T @ centred_x).square().sum()) / float(
        (centred_x.T @ centred_x).norm() * (centred_y.T @ centred_y).norm()
    )
    assert linear_cka(x, y) == pytest.approx(plain, abs=1e-9)
    assert linear_cka(x, y, debiased=True) == pytest.approx(naive_debiased_cka(x, y), abs=1e-9)


def test_cka_is_stable_for_small_samples_and_constant_features() -> None:
    x = features(n=6)
    with_constant = torch.cat([x, torch.full((6, 3), 2.5)], dim=1)  # constant columns add nothing
    assert linear_cka(x, with_constant) == pytest.approx(1.0, abs=1e-9)
    ones = torch.ones(6, 4) * 0.3
    for debiased in (False, True):
        assert linear_cka(ones, ones, debiased=debiased) == 1.0
        assert linear_cka(ones, x, debiased=debiased) == 0.0
        assert not math.isnan(linear_cka(features(n=4), features(n=4, seed=1), debiased=debiased))
    assert 0.0 <= linear_cka(features(n=2), features(n=2, seed=1)) <= 1.0
    with pytest.raises(ConfigError, match="at least 4"):
        linear_cka(features(n=3), features(n=3), debiased=True)
