"""Rebuild a trained model from an adapter folder (or a run folder holding one)."""

from __future__ import annotations

import os
from typing import Any

from torch import nn

from adaptlab.data.label_match import align_labels
from adaptlab.data.types import SPLIT_NAMES, Dataset
from adaptlab.errors import AdapterFileError, ConfigError, DataError
from adaptlab.methods.adapter_loading import load_adapter
from adaptlab.methods.combined_heads import require_head
from adaptlab.methods.manifest import MANIFEST, adapter_folder
from adaptlab.models.device import torch_device
from adaptlab.models.loading import LoadedModel, load_model
from adaptlab.models.quantize import quantize_base
from adaptlab.models.resolve import trusted_base
from adaptlab.tasks.adapter_manifest import read_adapter_manifest
from adaptlab.tasks.registry import get_task


def load_trained(
    path: str | os.PathLike[str],
    device: str = "cpu",
    *,
    model: str | None = None,
    head: str | None = None,
    quantize: str | None = None,
) -> tuple[LoadedModel, dict[str, Any]]:
    """The base model, with the folder's adapter (and those it was saved with) loaded.

    `head`: which head of an adapter combined from sources with different labels to load
    (`adaptlab.methods.combined_heads`); the manifest returned then has that head's task and
    label names. `quantize` (nf4, int8): quantise the base's linear layers first, as a run
    with `--quantize` trained the adapter on them (`adaptlab.models.quantize`).

    The base is `model` when given, else the one the manifest names, if that is a built-in
    or a hub name: a manifest that names a local folder (which could be anything on this
    machine) is only followed when the user passes it as `model`. The base loads under the
    run's seed, so its new head starts where training started (the analyses read those
    initial values as theta0).
    """
    target = torch_device(device)
    folder = adapter_folder(path)
    parsed = read_adapter_manifest(folder)
    manifest = parsed.raw
    chosen = require_head(parsed, folder, head)
    if chosen is not None:
        labels = list(chosen.label_names) if chosen.label_names else None
        manifest = {**manifest, "task": chosen.task, "label_names": labels, "train_head": True}
    task = manifest.get("task")
    if not task:
        raise AdapterFileError(
            f"{folder}: the manifest names no task; load the base model yourself "
            "and call adaptlab.load_adapter"
        )
    base_id = model or trusted_base(folder, manifest["base_model"]["id"])
    labels = manifest.get("label_names") or None
    found = get_task(task)  # the manifest names a task by name; the task knows what it needs
    if found.named_labels and labels is None:
        raise AdapterFileError(
            f"{folder / MANIFEST}: label_names must be the names of a {task} adapter's labels, "
            "got None"
        )
    kind = found.model_kind  # a language adapter's model has an LM head
    loaded = load_model(base_id, kind, label_names=labels, seed=manifest["seed"])
    adapted: nn.Module = loaded.model
    if quantize is not None:
        adapted.to(target)
        quantize_base(adapted, quantize)
    load_adapter(adapted, folder, head=head)
    adapted.to(target).eval()
    return loaded, manifest


def check_split(split: str) -> None:
    """`split` must name one of the fixed train / dev / test splits."""
    if split not in SPLIT_NAMES:
        raise ConfigError(f"--split must be one of {', '.join(SPLIT_NAMES)}, got {split!r}")


def check_data_fits(dataset: Dataset, manifest: dict[str, Any], data: str) -> Dataset:
    """The data set, its labels numbered as the adapter's; it must be of the adapter's task
    and have the same label names (in any order)."""
    if dataset.task != manifest["task"]:
        raise DataError(
            f"{data} is a {dataset.task} data set, the adapter was trained for {manifest['task']}"
        )
    return align_labels(dataset, manifest.get("label_names") or (), "the adapter")
