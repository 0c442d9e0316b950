"""Features of every layer, their cache, layer aggregation and controls, on tiny models."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from study_helpers import write_reviews
from tiny_models import LAYERS, save_tiny_bert

from adaptlab.data import load_dataset
from adaptlab.errors import ConfigError
from adaptlab.models import load_model
from adaptlab.select import (
    FeatureOptions,
    aggregate,
    extract,
    layer_scores,
    make_estimators,
    parse_candidate,
    rank,
    sample_examples,
    write_candidate,
)
from adaptlab.select.controls import first_blocks, load_candidate
from adaptlab.select.features import pool
from adaptlab.select.logme import LogME
from adaptlab.tasks.registry import LABELLED

pytestmark = pytest.mark.usefixtures("one_torch_thread", "feature_cache")


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> str:
    return save_tiny_bert(str(tmp_path_factory.mktemp("models") / "tiny-bert"))


@pytest.fixture(scope="module")
def reviews(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(write_reviews(tmp_path_factory.mktemp("data") / "reviews.csv", rows=80))


def test_features_hold_every_layer_and_match_the_models_own_hidden_states(
    model: str, tmp_path: Path
) -> None:
    varied = tmp_path / "varied.csv"  # lengths 1..9 words out of order: batches sort them
    rows = [
        f"{' '.join(['good'] * (1 + (i * 5) % 9))},{'fresh' if i % 2 else 'rotten'}"
        for i in range(40)
    ]
    varied.write_text("text,label\n" + "\n".join(rows) + "\n")
    dataset = load_dataset(str(varied), LABELLED)
    examples = sample_examples(dataset, None, 0)
    loaded = load_model(model, "base")
    features = extract(loaded, examples, dataset, batch_size=7, progress=False)
    assert features.hidden.shape == (LAYERS + 1, len(examples), loaded.model.config.hidden_size)
    assert features.layer_count == LAYERS
    assert list(features.labels) == [example.label for example in examples]
    # batching by length, padding and the reordering do not change an example's features
    for index, example in enumerate(examples):
        one = loaded.tokenizer(example.text, return_tensors="pt")
        with torch.inference_mode():
            states = loaded.model(**one, output_hidden_states=True).hidden_states
        expected = torch.stack(states)[:, 0].mean(dim=1).numpy()
        np.testing.assert_allclose(features.hidden[:, index], expected, atol=1e-5)


def test_first_token_pooling_takes_the_first_real_token_on_either_padding_side() -> None:
    states = torch.arange(2 * 2 * 3 * 1, dtype=torch.float32).reshape(2, 2, 3, 1)
    right = torch.tensor([[1, 1, 0], [1, 1, 1]])
    left = torch.tensor([[0, 1, 1], [1, 1, 1]])
    assert pool(states, right, "first")[0, :, 0].tolist() == [0.0, 3.0]
    assert pool(states, left, "first")[0, :, 0].tolist() == [1.0, 3.0]
    assert pool(states, right, "mean")[0, :, 0].tolist() == [0.5, 4.0]


def test_the_sample_is_a_studys_training_set_and_token_tasks_are_refused(reviews: str) -> None:
    dataset = load_dataset(reviews, LABELLED)
    sample = sample_examples(dataset, 20, seed=3)
    assert len(sample) == 20
    assert sorted({example.label for example in sample}) == [0, 1]
    assert sample_examples(dataset, 20, seed=3) == sample
    assert sample_examples(dataset, 10_000, seed=3) == dataset.splits["train"]


def test_features_are_cached_and_changed_options_or_data_miss(
    model: str, reviews: str, tmp_path: Path
) -> None:
    dataset = load_dataset(reviews, LABELLED)
    candidates = [parse_candidate(model)]
    options = FeatureOptions(sample=None, progress=False)
    logme = make_estimators("logme")
    first = rank(candidates, dataset, logme, options=options)
    again = rank(candidates, dataset, logme, options=options)
    assert (first.cache_hits, again.cache_hits) == (0, 1)
    assert again.rows[0].scores == first.rows[0].scores
    assert list((tmp_path / "cache" / "features").glob("*.safetensors"))
    other = rank(
        candidates,
        dataset,
        logme,
        options=FeatureOptions(sample=None, pooling="first", progress=False),
    )
    assert other.cache_hits == 0
    copy = tmp_path / "reviews.csv"
    copy.write_text(Path(reviews).read_text())
    assert (
        rank(candidates, load_dataset(str(copy), LABELLED), logme, options=options).cache_hits == 1
    )
    copy.write_text(copy.read_text().replace("a ", "an ", 1))  # edited in place, same rows
    assert (
        rank(candidates, load_dataset(str(copy), LABELLED), logme, options=options).cache_hits == 0
    )


def test_controls_reinitialise_or_cut_the_model_and_write_loadable_folders(
    model: str, tmp_path: Path
) -> None:
    base = load_model(model, "base").model
    reinit = load_candidate(parse_candidate(f"{model}@reinit"), seed=1).model
    again = load_candidate(parse_candidate(f"{model}@reinit"), seed=1).model
    cut = load_candidate(parse_candidate(f"{model}@first1"))
    assert not torch.equal(
        base.embeddings.word_embeddings.weight, reinit.embeddings.word_embeddings.weight
    )
    torch.testing.assert_close(reinit.state_dict(), again.state_dict())
    assert len(cut.model.encoder.layer) == 1 and cut.model.config.num_hidden_layers == 1
    torch.testing.assert_close(
        cut.model.encoder.layer[0].state_dict(), base.encoder.layer[0].state_dict()
    )
    folder = write_candidate(parse_candidate(f"{model}@first1"), tmp_path)
    assert folder.name == "tiny-bert-first1"
    reloaded = load_model(str(folder), "single_label", num_labels=2).model
    assert reloaded.config.num_hidden_layers == 1


def test_first_k_features_equal_the_full_models_layer_k(model: str, reviews: str) -> None:
    dataset = load_dataset(reviews, LABELLED)
    examples = sample_examples(dataset, None, 0)[:10]
    full = extract(load_model(model, "base"), examples, dataset, progress=False)
    cut = extract(
        load_candidate(parse_candidate(f"{model}@first1")), examples, dataset, progress=False
    )
    np.testing.assert_allclose(cut.hidden[1], full.hidden[1], atol=1e-5)


@pytest.mark.parametrize("text", ["x@first0", "x@firsts", "x@reinit2", "@reinit", ""])
def test_bad_candidates_are_one_clear_error(text: str) -> None:
    with pytest.raises(ConfigError):
        parse_candidate(text)


def test_cutting_more_blocks_than_the_model_has_is_refused(model: str) -> None:
    with pytest.raises(ConfigError, match="has 2 blocks"):
        first_blocks(load_model(model, "base").model, 5)


def test_layer_aggregation_last_best_and_mean() -> None:
    rng = np.random.default_rng(0)
    labels = np.arange(60) % 2
    noise = rng.normal(size=(4, 60, 5))
    hidden = noise.copy()
    hidden[2, :, 0] += 4 * labels  # layer 2 is the informative one
    from adaptlab.select import LayerFeatures

    features = LayerFeatures(hidden=hidden, labels=labels)
    logme = LogME()
    scores = layer_scores(features, logme)
    assert len(scores) == 4
    assert aggregate(features, logme, "best").layer == 2
    assert aggregate(features, logme, "last").layer == 3
    assert aggregate(features, logme, "last").score == pytest.approx(scores[3])
    mean = aggregate(features, logme, "mean")
    assert mean.layer is None and scores[3] < mean.score < scores[2]
    with pytest.raises(ConfigError, match="layer aggregation"):
        aggregate(features, logme, "first")  # type: ignore[arg-type]


def test_per_layer_rows_name_the_first_k_run_they_correspond_to(model: str, reviews: str) -> None:
    dataset = load_dataset(reviews, LABELLED)
    candidates = [parse_candidate(model), parse_candidate(f"{model}@reinit")]
    ranking = rank(
        candidates,
        dataset,
        make_estimators("knn"),
        per_layer=True,
        options=FeatureOptions(sample=None, progress=False),
    )
    assert [row.key for row in ranking.rows] == ["tiny-bert", "tiny-bert-reinit"]
    assert [(row.name.split("#")[1], row.key) for row in ranking.layer_rows] == [
        ("L1", "tiny-bert-first1"),
        ("L2", "tiny-bert"),
        ("L1", None),
        ("L2", "tiny-bert-reinit"),
    ]
    assert sorted(ranking.order("knn")) == sorted(row.name for row in ranking.rows)


@pytest.mark.real
def test_pretrained_minilm_outranks_its_reinitialised_copy_on_rotten_tomatoes() -> None:
    dataset = load_dataset("rotten-tomatoes", LABELLED)
    candidates = [parse_candidate("minilm-l6"), parse_candidate("minilm-l6@reinit")]
    ranking = rank(
        candidates,
        dataset,
        make_estimators("logme,hscore,knn"),
        options=FeatureOptions(sample=150, max_length=48, progress=False),
    )
    for name in ("logme", "hscore", "knn"):
        assert ranking.order(name) == ["minilm-l6", "minilm-l6@reinit"], name
