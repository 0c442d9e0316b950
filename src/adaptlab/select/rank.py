"""Rank candidate models (and their layers) for a data set with transferability estimators."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from torch import nn

import adaptlab.checks as checks
from adaptlab.data.types import Dataset, Example
from adaptlab.models.device import torch_device
from adaptlab.models.resolve import resolve_model
from adaptlab.paths import check_writable
from adaptlab.select.base import Estimator
from adaptlab.select.cache import (
    cached_features,
    examples_digest,
    features_folder,
    features_key,
    model_files_stamp,
)
from adaptlab.select.controls import Candidate, load_candidate
from adaptlab.select.features import (
    LayerFeatures,
    Pooling,
    extract,
    labels_of,
    sample_examples,
)
from adaptlab.select.layers import Aggregate, aggregate, layer_scores
from adaptlab.select.ranking import Ranking, RankRow
from adaptlab.select.rare import check_sample, drop_rare_classes


@dataclass(frozen=True)
class FeatureOptions:
    """How features are drawn: sample, pooling, batching, token length, cache, device; with
    `drop_rare_classes`, the sample leaves out the classes with fewer examples than the
    estimators need."""

    sample: int | None = 2000
    seed: int = 0
    pooling: Pooling = "mean"
    batch_size: int = 32
    max_length: int = 128
    use_cache: bool = True
    device: str = "cpu"
    progress: bool = True
    drop_rare_classes: bool = False

    def __post_init__(self) -> None:
        if self.sample is not None:
            checks.positive(self.sample, "--sample")
        checks.seed(self.seed, "--seed")
        checks.positive(self.batch_size, "--batch-size")
        checks.at_least(self.max_length, 2, "--max-length")


def rank(
    candidates: Sequence[Candidate],
    dataset: Dataset,
    estimators: Sequence[Estimator],
    *,
    options: FeatureOptions = FeatureOptions(),
    how: Aggregate = "last",
    per_layer: bool = False,
) -> Ranking:
    """Score each candidate with each estimator (layers aggregated by `how`)."""
    torch_device(options.device)  # before any long work
    if options.use_cache:
        check_writable(
            features_folder(), "the feature cache", "set ADAPTLAB_CACHE to a folder you can write"
        )
    examples = sample_examples(dataset, options.sample, options.seed)
    dropped = None
    if options.drop_rare_classes:
        examples, dropped = drop_rare_classes(examples, dataset, estimators)
    check_sample(examples, dataset, estimators)
    rows, layer_rows = [], []
    extract_seconds = score_seconds = 0.0
    hits = 0
    for candidate in candidates:
        start = time.perf_counter()
        features, hit = candidate_features(candidate, dataset, examples, options)
        extract_seconds += time.perf_counter() - start
        hits += hit
        start = time.perf_counter()
        scores, chosen = {}, {}
        per_layer_scores: dict[str, list[float]] = {}
        for estimator in estimators:
            if per_layer or how == "best":
                per_layer_scores[estimator.name] = layer_scores(features, estimator)
            result = aggregate(features, estimator, how, per_layer_scores.get(estimator.name))
            scores[estimator.name], chosen[estimator.name] = result.score, result.layer
        rows.append(RankRow(candidate.text, candidate.folder_name, scores, chosen))
        if per_layer:
            layer_rows.extend(_layer_rows(candidate, features, per_layer_scores))
        score_seconds += time.perf_counter() - start
    return Ranking(
        data=dataset.name,
        examples=len(examples),
        estimators=tuple(e.name for e in estimators),
        rows=tuple(rows),
        layer_rows=tuple(layer_rows),
        extract_seconds=extract_seconds,
        score_seconds=score_seconds,
        cache_hits=hits,
        dropped=dropped if dropped is not None and dropped.classes else None,
    )


def candidate_features(
    candidate: Candidate, dataset: Dataset, examples: Sequence[Example], options: FeatureOptions
) -> tuple[LayerFeatures, bool]:
    """A candidate's features for `examples`, from the cache when they were extracted before."""
    location = resolve_model(candidate.base).location
    key = features_key(
        {
            "candidate": candidate.text,
            "location": location,
            "files": model_files_stamp(location),
            "data": [dataset.name, dataset.task, examples_digest(examples)],
            "sample": options.sample,
            "seed": options.seed,
            "pooling": options.pooling,
            "max_length": options.max_length,
        }
    )

    def compute() -> LayerFeatures:
        loaded = load_candidate(candidate, options.seed)
        model: nn.Module = loaded.model
        model.to(torch_device(options.device))
        return extract(
            loaded,
            examples,
            dataset,
            pooling=options.pooling,
            batch_size=options.batch_size,
            max_length=options.max_length,
            progress=options.progress,
        )

    labels = labels_of(examples, dataset.task)
    return cached_features(key, compute, labels, use_cache=options.use_cache)


def _layer_rows(
    candidate: Candidate, features: LayerFeatures, per_layer: dict[str, list[float]]
) -> list[RankRow]:
    """One row per block 1..L; block k corresponds to fine-tuning the first k blocks."""
    rows = []
    last = features.layer_count
    for layer in range(1, last + 1):
        if layer == last:
            key: str | None = candidate.folder_name
        elif candidate.reinit:
            key = None
        else:
            key = Candidate(
                f"{candidate.base}@first{layer}", candidate.base, first_k=layer
            ).folder_name
        scores = {name: values[layer] for name, values in per_layer.items()}
        rows.append(
            RankRow(f"{candidate.text}#L{layer}", key, scores, dict.fromkeys(scores, layer))
        )
    return rows
