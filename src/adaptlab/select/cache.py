"""Features cached on disk as safetensors, keyed by everything that changes them."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from safetensors import SafetensorError
from safetensors.numpy import load_file, save

from adaptlab.data.types import Example
from adaptlab.errors import ConfigError
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
    key: str,
    compute: Callable[[], LayerFeatures],
    labels: np.ndarray,
    *,
    use_cache: bool = True,
) -> tuple[LayerFeatures, bool]:
    """The features under `key` of the examples whose labels are `labels`, computed and
    written on a miss; also whether it was a hit. An entry that cannot be read or does not
    hold finite features of those examples (a file cut short or changed since) is a miss,
    written anew."""
    path = features_folder() / f"{key}.safetensors"
    found = _read_entry(path, labels) if use_cache else None
    if found is not None:
        return found, True
    features = compute()
    hidden = np.ascontiguousarray(features.hidden)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, save({"hidden": hidden, "labels": features.labels}))
    except OSError as error:
        raise ConfigError(
            f"cannot write the feature cache entry {path} ({error.strerror}); remove it, or set "
            "ADAPTLAB_CACHE to a folder you can write"
        ) from None
    return features, False


def _read_entry(path: Path, labels: np.ndarray) -> LayerFeatures | None:
    """The features an entry holds, None where it cannot be read or holds no finite
    layers x examples x width floats of examples labelled `labels`."""
    if not path.is_file():
        return None
    try:
        tensors = load_file(path)
    except (OSError, SafetensorError):
        return None
    hidden, found = tensors.get("hidden"), tensors.get("labels")
    if hidden is None or found is None or hidden.ndim != 3 or hidden.dtype != np.float32:
        return None
    if hidden.shape[1] != len(labels) or not np.array_equal(found, labels):
        return None
    if not np.isfinite(hidden).all():
        return None
    return LayerFeatures(hidden=hidden, labels=found)
