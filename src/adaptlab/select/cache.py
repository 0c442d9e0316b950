"""Features cached on disk as safetensors, keyed by everything that changes them."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from safetensors.numpy import load_file, save

from adaptlab.data.types import Example
from adaptlab.fileio import atomic_write
from adaptlab.models.cache import cache_dir
from adaptlab.select.features import LayerFeatures
from adaptlab.version import __version__


def features_key(fields: Mapping[str, Any]) -> str:
    """A short hash of the fields (model, model files, data, sample, seed, pooling, length)."""
    text = json.dumps({**fields, "adaptlab": __version__}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def examples_digest(examples: Sequence[Example]) -> str:
    """A hash of the examples' texts and labels, so a data file edited in place misses."""
    rows = [[example.text, example.text_pair, example.label] for example in examples]
    return hashlib.sha256(json.dumps(rows).encode()).hexdigest()


def model_files_stamp(location: str) -> list[tuple[str, int, int]]:
    """Names, sizes and mtimes of a model folder's weight files, so a rewritten folder misses."""
    folder = Path(location)
    if not folder.is_dir():
        return []
    return sorted(
        (p.name, p.stat().st_size, p.stat().st_mtime_ns)
        for p in folder.iterdir()
        if p.suffix in (".safetensors", ".bin", ".gguf", ".json")
    )


def features_folder() -> Path:
    """Where extracted features are kept."""
    return cache_dir() / "features"


def cached_features(
    key: str, compute: Callable[[], LayerFeatures], *, use_cache: bool = True
) -> tuple[LayerFeatures, bool]:
    """The features under `key`, computed and written on a miss; also whether it was a hit."""
    path = features_folder() / f"{key}.safetensors"
    if use_cache and path.is_file():
        tensors = load_file(path)
        return LayerFeatures(hidden=tensors["hidden"], labels=tensors["labels"]), True
    features = compute()
    path.parent.mkdir(parents=True, exist_ok=True)
    hidden = np.ascontiguousarray(features.hidden)
    atomic_write(path, save({"hidden": hidden, "labels": features.labels}))
    return features, False
