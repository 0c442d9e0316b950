"""Rebuild a trained model from an adapter folder (or a run folder holding one)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from torch import nn

from adaptlab.errors import AdapterFileError
from adaptlab.methods import load_adapter, read_manifest
from adaptlab.methods.persistence import MANIFEST
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
    """The base model named in the manifest, with the adapter loaded, and the manifest."""
    folder = adapter_folder(path)
    manifest = read_manifest(folder)
    base_id = manifest["base_model"]["id"]
    task = manifest.get("task")
    if not base_id or not task:
        raise AdapterFileError(
            f"{folder}: the manifest names no base model or task; load the base model yourself "
            "and call adaptlab.load_adapter"
        )
    loaded = load_model(base_id, task, label_names=manifest.get("label_names") or None)
    model: nn.Module = loaded.model
    load_adapter(model, folder)
    model.to(device).eval()
    return loaded, manifest
