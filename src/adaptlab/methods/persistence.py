"""Save an adaptation as safetensors + a JSON manifest, and load it onto a fresh base model.

An adapter folder holds ``adapter.safetensors`` (only the trainable tensors: inserted
modules, trained pretrained weights, the head) and ``manifest.json`` (methods and configs,
backbone overrides, base model id, class and fingerprint, labels, task, metrics, versions,
and the tensors' SHA-256). No pickle anywhere.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import safetensors.torch
import torch
import transformers
from torch import nn

from adaptlab.errors import AdapterFileError
from adaptlab.fileio import atomic_write
from adaptlab.methods.adapt import adapt, get_handle, remove
from adaptlab.methods.registry import make_config
from adaptlab.version import __version__

MANIFEST = "manifest.json"
TENSORS = "adapter.safetensors"
FORMAT = "adaptlab-adapter"
FORMAT_VERSION = 1


def save_adapter(
    model: nn.Module,
    folder: str | os.PathLike[str],
    *,
    base_model_id: str | None = None,
    task: str | None = None,
    label_names: Sequence[str] | None = None,
    metrics: Mapping[str, Any] | None = None,
) -> Path:
    """Write `model`'s adaptation to `folder` (created if needed); return the folder."""
    handle = get_handle(model)
    if any(getattr(m, "merged", False) for m in handle.inserted.get("lora", {}).values()):
        raise AdapterFileError("LoRA is merged into the weights: unmerge before saving")
    params = dict(model.named_parameters())
    tensors = {n: params[n].detach().to("cpu").contiguous() for n in handle.trainable_names}
    config = getattr(model, "config", None)
    if label_names is None and config is not None and getattr(config, "id2label", None):
        label_names = [config.id2label[i] for i in sorted(config.id2label)]
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    tensor_path = folder / TENSORS
    atomic_write(tensor_path, safetensors.torch.save(tensors))
    manifest = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "library_version": __version__,
        "torch_version": torch.__version__,
        "transformers_version": transformers.__version__,
        "methods": [{"name": c.name, "config": c.to_dict()} for c in handle.configs],
        "backbone_overrides": handle.overrides.to_dict(),
        "train_head": handle.train_head,
        "seed": handle.seed,
        "base_model": {
            "id": base_model_id or getattr(config, "name_or_path", None),
            "class": type(model).__name__,
            "model_type": getattr(config, "model_type", None),
            "fingerprint": handle.base_fingerprint,
        },
        "task": task,
        "label_names": list(label_names) if label_names else None,
        "metrics": dict(metrics) if metrics else None,
        "tensors": {
            "file": TENSORS,
            "count": len(tensors),
            "parameters": sum(t.numel() for t in tensors.values()),
            "bytes": tensor_path.stat().st_size,
            "sha256": _sha256(tensor_path),
        },
    }
    atomic_write(folder / MANIFEST, json.dumps(manifest, indent=2).encode())
    return folder


def read_manifest(folder: str | os.PathLike[str]) -> dict[str, Any]:
    """The manifest of an adapter folder, checked for format and version."""
    path = Path(folder) / MANIFEST
    if not path.is_file():
        raise AdapterFileError(f"{folder}: no {MANIFEST}; not an adaptlab adapter folder")
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise AdapterFileError(f"{path}: not valid JSON ({error})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise AdapterFileError(f"{path}: not an adaptlab adapter manifest")
    if manifest.get("format_version") != FORMAT_VERSION:
        raise AdapterFileError(
            f"{path}: adapter format version {manifest.get('format_version')} is not "
            f"supported by adaptlab {__version__} (expects {FORMAT_VERSION})"
        )
    return manifest


def load_adapter(model: nn.Module, folder: str | os.PathLike[str]) -> nn.Module:
    """Adapt a fresh base `model` as saved in `folder` and load the trained tensors into it."""
    manifest = read_manifest(folder)
    base = manifest["base_model"]
    if type(model).__name__ != base["class"]:
        raise AdapterFileError(
            f"{folder}: adapter was saved from a {base['class']}, this model is a "
            f"{type(model).__name__}; load the base model with the same task class"
        )
    tensors = _read_tensors(Path(folder), manifest)
    configs = [make_config(m["name"], m["config"]) for m in manifest["methods"]]
    handle = adapt(
        model,
        configs,
        backbone=manifest["backbone_overrides"],
        train_head=manifest["train_head"],
        seed=manifest["seed"],
    )
    if handle.base_fingerprint != base["fingerprint"]:
        remove(model)
        raise AdapterFileError(
            f"{folder}: adapter was trained on base {base['id']!r} (fingerprint "
            f"{base['fingerprint']}), this model's fingerprint is {handle.base_fingerprint}; "
            "load the same base model"
        )
    params = dict(model.named_parameters())
    expected = set(handle.trainable_names)
    problem = _mismatch(expected, tensors, params)
    if problem:
        remove(model)
        raise AdapterFileError(f"{folder}: {problem}")
    with torch.no_grad():
        for name, tensor in tensors.items():
            params[name].copy_(tensor)
    config = getattr(model, "config", None)
    if manifest.get("label_names") and config is not None:
        labels = manifest["label_names"]
        config.id2label = dict(enumerate(labels))
        config.label2id = {label: i for i, label in enumerate(labels)}
    return model


def _read_tensors(folder: Path, manifest: Mapping[str, Any]) -> dict[str, torch.Tensor]:
    info = manifest["tensors"]
    path = folder / info["file"]
    if not path.is_file():
        raise AdapterFileError(f"{path}: missing; the adapter folder is incomplete")
    if _sha256(path) != info["sha256"]:
        raise AdapterFileError(f"{path}: contents do not match the manifest (corrupt or truncated)")
    try:
        return safetensors.torch.load_file(str(path))
    except Exception as error:  # safetensors raises its own error types for bad headers
        raise AdapterFileError(f"{path}: cannot be read as safetensors ({error})") from None


def _mismatch(
    expected: set[str], tensors: Mapping[str, torch.Tensor], params: Mapping[str, nn.Parameter]
) -> str | None:
    missing = sorted(expected - set(tensors))
    if missing:
        return f"tensor {missing[0]!r} is missing from the adapter ({len(missing)} missing)"
    unexpected = sorted(set(tensors) - expected)
    if unexpected:
        return f"tensor {unexpected[0]!r} in the adapter has no place in this model"
    for name, tensor in tensors.items():
        if tuple(tensor.shape) != tuple(params[name].shape):
            return (
                f"tensor {name!r} has shape {tuple(tensor.shape)} in the adapter but "
                f"{tuple(params[name].shape)} in this model"
            )
    return None


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        for chunk in iter(lambda: file.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()
