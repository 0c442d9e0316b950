"""Transferability estimators on synthetic features whose answer is known."""

from __future__ import annotations

import numpy as np
import pytest

from adaptlab.errors import ConfigError, DataError
from adaptlab.select import ESTIMATORS, make_estimators
from adaptlab.select.base import Estimator
from adaptlab.select.hscore import ledoit_wolf
from adaptlab.select.knn import KNN

ALL = sorted(ESTIMATORS.names())
DISCRIMINATIVE = [name for name in ALL if name != "intra-variance"]


def blobs(separation: float, n: int = 300, d: int = 20, k: int = 4, seed: int = 0) -> tuple:
    """Gaussian classes around random centres `separation` apart (in noise units)."""
    rng = np.random.default_rng(seed)
    labels = np.arange(n) % k
    centres = rng.normal(size=(k, d))
    centres *= separation / np.linalg.norm(centres, axis=1, keepdims=True)
    return centres[labels] + rng.normal(size=(n, d)), labels


def estimator(name: str) -> Estimator:
    return ESTIMATORS.get(name)()


@pytest.mark.parametrize("name", DISCRIMINATIVE)
def test_separated_classes_score_above_overlapping_ones(name: str) -> None:
    separated, labels = blobs(6.0)
    overlapping, _ = blobs(0.3)
    assert estimator(name).score(separated, labels) > estimator(name).score(overlapping, labels)


@pytest.mark.parametrize("name", DISCRIMINATIVE)
def test_permuting_the_labels_lowers_the_score(name: str) -> None:
    x, labels = blobs(4.0)
    shuffled = np.random.default_rng(1).permutation(labels)
    assert estimator(name).score(x, labels) > estimator(name).score(x, shuffled)


def test_intra_class_variance_rises_as_classes_spread_out_as_tmi_promises() -> None:
    # TMI: at a fixed total (features are normalised), more variance left inside the classes
    # means a more adaptable model; collapsed, well-separated classes score lower.
    separated, labels = blobs(6.0)
    overlapping, _ = blobs(0.3)
    score = estimator("intra-variance")
    assert score.score(overlapping, labels) > score.score(separated, labels)


@pytest.mark.parametrize("name", ALL)
def test_scores_do_not_change_with_feature_scale_rotation_or_example_order(name: str) -> None:
    x, labels = blobs(2.0, d=8)
    rotation, _ = np.linalg.qr(np.random.default_rng(2).normal(size=(8, 8)))
    order = np.random.default_rng(3).permutation(len(x))
    base = estimator(name).score(x, labels)
    assert estimator(name).score(7.5 * x, labels) == pytest.approx(base, rel=1e-6, abs=1e-9)
    if name not in ("gbc", "nleep"):  # diagonal Gaussians: not rotation invariant by design
        assert estimator(name).score(x @ rotation, labels) == pytest.approx(
            base, rel=1e-6, abs=1e-9
        )
    if name != "nleep":  # the mixture's initial means are drawn by position
        assert estimator(name).score(x[order], labels[order]) == pytest.approx(base, rel=1e-6)


@pytest.mark.parametrize("name", ALL)
def test_renaming_the_classes_changes_nothing(name: str) -> None:
    x, labels = blobs(2.0)
    renamed = np.array([10, 3, 7, 42])[labels]
    assert estimator(name).score(x, renamed) == pytest.approx(estimator(name).score(x, labels))


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize(
    "case", ["one-example class", "constant features", "more dims than examples", "two examples"]
)
def test_degenerate_inputs_give_a_finite_score(name: str, case: str) -> None:
    x, labels = blobs(3.0, n=40, d=10)
    if case == "one-example class":
        labels = labels.copy()
        labels[0] = 9
    elif case == "constant features":
        x = np.full_like(x, 3.0)
    elif case == "more dims than examples":
        x = np.random.default_rng(0).normal(size=(40, 500))
    else:
        x, labels = x[:2], np.array([0, 1])
    score = estimator(name).score(x, labels)
    assert np.isfinite(score)


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize(
    ("features", "labels", "message"),
    [
        (np.ones((5, 3)), np.zeros(5, dtype=int), "same class"),
        (np.ones((5, 3)), np.arange(4), "one label per example"),
        (np.ones(5), np.arange(5), "2-d"),
        (np.ones((1, 3)), np.arange(1), "at least 2 examples"),
        (np.full((4, 2), np.nan), np.arange(4), "NaN"),
        (np.ones((4, 2)), np.array(["a", "b", "a", "b"]), "integers"),
    ],
)
def test_bad_inputs_are_one_clear_error(
    name: str, features: np.ndarray, labels: np.ndarray, message: str
) -> None:
    with pytest.raises(DataError, match=message):
        estimator(name).fit(features, labels)


def test_regression_targets_work_where_the_method_allows_and_are_refused_elsewhere() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(200, 10))
    signal = x @ rng.normal(size=10)
    noise = rng.normal(size=200) * 10
    for name in ("logme", "knn"):
        assert estimator(name).score(x, signal + 0.1 * noise / 10) > estimator(name).score(x, noise)
    for name in ("hscore", "nleep", "gbc", "transrate", "intra-variance"):
        with pytest.raises(ConfigError, match="needs class labels"):
            estimator(name).fit(x, signal)
    with pytest.raises(DataError, match="all equal"):
        estimator("logme").fit(x, np.ones(200))


def test_logme_prefers_the_features_that_predict_the_labels_linearly() -> None:
    rng = np.random.default_rng(0)
    labels = np.arange(400) % 2
    informative = np.c_[labels + 0.3 * rng.normal(size=400), rng.normal(size=(400, 5))]
    noise = rng.normal(size=(400, 6))
    logme = estimator("logme")
    assert logme.score(informative, labels) > logme.score(noise, labels) + 0.1


def test_ledoit_wolf_shrinks_toward_the_scaled_identity_when_examples_are_few() -> None:
    rng = np.random.default_rng(0)
    few = rng.normal(size=(5, 50))
    few -= few.mean(axis=0)
    shrunk = ledoit_wolf(few)
    assert np.linalg.matrix_rank(few.T @ few) < 50
    assert np.linalg.eigvalsh(shrunk).min() > 0  # invertible despite d > n


def test_estimator_lists_are_parsed_and_unknown_names_refused() -> None:
    assert [e.name for e in make_estimators("all")] == ESTIMATORS.names()
    assert [e.name for e in make_estimators("knn, logme,knn")] == ["knn", "logme"]
    with pytest.raises(ConfigError, match="unknown estimator leep"):
        make_estimators("logme,leep")
    with pytest.raises(ConfigError, match="knn: k must be at least 1"):
        KNN(k=0)


def test_fit_returns_the_estimator_holding_the_score_that_score_returns() -> None:
    x, labels = blobs(2.0)
    logme = estimator("logme")
    assert logme.fit(x, labels) is logme
    assert logme.score_ == logme.score(x, labels)
