"""Rebuild a trained model from an adapter folder (or a run folder holding one)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from torch import nn

from adaptlab.data import Dataset
from adaptlab.data.types import SPLIT_NAMES
from adaptlab.errors import AdapterFileError, ConfigError, DataError
from adaptlab.methods import load_adapter, read_manifest
from adaptlab.methods.persistence import MANIFEST
from adaptlab.models.device import torch_device
from adaptlab.models.loading import LoadedModel, load_model

RUN_ADAPTER_FOLDER = "adapter"


def adapter_folder(path: str | os.PathLike[str]) -> Path:
    """`path` itself if it holds a manifest, else its `adapter/` subfolder (a run folder)."""
    folder = Path(path)
    if not folder.exists():
        raise AdapterFileError(f"{folder}: no such adapter or run folder")
    if not (folder / MANIFEST).is_file() and (folder / RUN_ADAPTER_FOLDER / MANIFEST).is_file():
        return folder / RUN_ADAPTER_FOLDER
    return folder


def load_trained(
    path: str | os.PathLike[str], device: str = "cpu"
) -> tuple[LoadedModel, dict[str, Any]]:
    """The base model named in the manifest, with the adapter loaded, and the manifest.

    The base loads under the run's seed, so its new head starts where training started (the
    analyses read those initial values as theta0)."""
    target = torch_device(device)
    folder = adapter_folder(path)
    manifest = read_manifest(folder)
    base_id = manifest["base_model"]["id"]
    task = manifest.get("task")
    if not base_id or not task:
        raise AdapterFileError(
            f"{folder}: the manifest names no base model or task; load the base model yourself "
            "and call adaptlab.load_adapter"
        )
    labels = manifest.get("label_names") or None
    loaded = load_model(base_id, task, label_names=labels, seed=manifest.get("seed"))
    model: nn.Module = loaded.model
    load_adapter(model, folder)
    model.to(target).eval()
    return loaded, manifest


def check_split(split: str) -> None:
    """`split` must name one of the fixed train / dev / test splits."""
    if split not in SPLIT_NAMES:
        raise ConfigError(f"--split must be one of {', '.join(SPLIT_NAMES)}, got {split!r}")


def check_data_fits(dataset: Dataset, manifest: dict[str, Any], data: str) -> None:
    """The data set must have the task and labels the adapter was trained for."""
    labels = list(manifest.get("label_names") or [])
    if dataset.task != manifest["task"]:
        raise DataError(
            f"{data} is a {dataset.task} data set, the adapter was trained for {manifest['task']}"
        )
    if list(dataset.label_names) != labels:
        raise DataError(
            f"{data} has labels {list(dataset.label_names)}, the adapter was trained on {labels}"
        )
