"""Save a named adapter (or fusion) as safetensors + a JSON manifest, and read a folder's
manifest back as data (loading it onto a model: `adaptlab.methods.adapter_loading`).

An adapter folder holds ``adapter.safetensors`` (only the tensors the adapter trains:
inserted modules, its copies of pretrained weights, its head) and ``manifest.json``
(`adaptlab.methods.manifest`). A folder saved while the adapter ran inside a Stack or Fuse
also holds the other adapters of that composition, each in ``adapters/<name>/``, with their
checksums in the manifest: a fusion folder carries the adapters it was trained with, so it
loads onto a bare base model by itself, and a fusion whose adapter is missing or changed is
refused. No pickle anywhere.

Tensor names in the file do not depend on the adapter's name: an inserted module's
parameters are stored as ``<site>.adaptlab_<method>.<param>`` (what format 1 wrote too) and
pretrained-weight copies under the model's own parameter names (`file_key`).

The manifest's optional `scale` says how the adapter was trained (precision, the frozen base's
dtype, its quantisation: `AdaptHandle.record_training_scale`). The base's fingerprint is that
of its original weights even on a quantised base (`adaptlab.models.quantize`), so an adapter
trained on a 4-bit base loads onto the full-precision one, and the reverse.

The manifest's optional `chat_template` is the chat template the adapter was trained with
(`save_adapter(..., chat_template=...)`), which `adaptlab serve` renders its chats with.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import safetensors.torch
import torch
import transformers
from torch import nn

from adaptlab.backbone.parts import INSERTED
from adaptlab.errors import AdapterFileError, ConfigError
from adaptlab.fileio import atomic_write, file_sha256
from adaptlab.methods.adapt import get_handle
from adaptlab.methods.blocks import Block, Fuse
from adaptlab.methods.handle import AdaptHandle
from adaptlab.methods.manifest import (
    FORMAT,
    FORMAT_VERSION,
    MANIFEST,
    MEMBERS,
    TENSORS,
    chat_template_problem,
    parse_manifest,
)
from adaptlab.methods.manifest_combined import Combined, HeadInfo, heads_data
from adaptlab.methods.state import AdapterState, get_state
from adaptlab.version import __version__


def save_adapter(
    model: nn.Module,
    folder: str | os.PathLike[str],
    *,
    name: str | None = None,
    base_model_id: str | None = None,
    task: str | None = None,
    label_names: Sequence[str] | None = None,
    metrics: Mapping[str, Any] | None = None,
    chat_template: str | None = None,
    combined: Combined | None = None,
    heads: Mapping[str, HeadInfo] | None = None,
) -> Path:
    """Write adapter `name` (default: the model's only or `default` one) to `folder`.

    A fusion's folder holds the adapters it fuses; an adapter at the top of the running
    Stack (a task adapter over a language adapter) holds the adapters below it, and the
    folder records that Stack, so loading it brings back what ran. `chat_template`: the
    Jinja chat template the adapter was trained with, which chats served with it are
    rendered by (default: the one its run recorded, `AdaptHandle.record_chat_template`).
    `combined` and `heads`: what a combined adapter records (`adaptlab.methods.combine`; the
    heads' files are written there first). Returns the folder.
    """
    handle = get_handle(model, name)
    chat_template = chat_template if chat_template is not None else handle.chat_template
    problem = chat_template_problem(chat_template) if chat_template is not None else None
    if problem:
        raise ConfigError(f"chat_template must be {problem}")
    state = get_state(model)
    assert state is not None  # the model has the adapter
    composition = _saved_composition(handle, state)
    units = [handle, *state.units_in(composition)]
    merged = [u.name for u in units if u.name in state.merged()]
    if merged:
        raise AdapterFileError(f"adapter {merged[0]!r} is merged into the weights: unmerge first")
    config = getattr(model, "config", None)
    if (
        label_names is None
        and not heads
        and config is not None
        and getattr(config, "id2label", None)
    ):
        label_names = [config.id2label[i] for i in sorted(config.id2label)]
    about = {
        "base_id": base_model_id or getattr(config, "name_or_path", None) or None,
        "task": task,
        "label_names": list(label_names) if label_names else None,
        "metrics": dict(metrics) if metrics else None,
        "chat_template": chat_template,
        "combined": combined.to_dict() if combined is not None else None,
        "heads": heads_data(heads) if heads else None,
    }
    _save(handle, state, Path(folder), composition, about)
    return Path(folder)


def _saved_composition(handle: AdaptHandle, state: AdapterState) -> Block | None:
    """What `handle`'s folder records: the running block that says so (`Block.saved_with`: a
    Stack `handle` tops), or a fusion's Fuse."""
    running = state.active
    if isinstance(running, Block) and running.saved_with(handle, state.adapters):
        return running
    return Fuse(*handle.fused) if handle.is_fusion else None


def _save(
    handle: AdaptHandle,
    state: AdapterState,
    folder: Path,
    composition: Block | None,
    about: Mapping[str, Any],
) -> str:
    """Write `handle` and the other adapters of `composition` below it; the tensors' SHA-256."""
    members = {
        member.name: _save(
            member,
            state,
            folder / MEMBERS / member.name,
            _saved_composition(member, state) if member.is_fusion else None,
            {"base_id": about.get("base_id")},
        )
        for member in state.units_in(composition)
        if member is not handle
    }
    data = composition.to_data() if composition is not None else None
    return _write(handle, folder, {**about, "composition": data, "members": members})


def _write(handle: AdaptHandle, folder: Path, about: Mapping[str, Any]) -> str:
    """Write one adapter's tensors and manifest; return the tensor file's SHA-256."""
    folder.mkdir(parents=True, exist_ok=True)
    model = handle.model
    config = getattr(model, "config", None)
    tensors = {
        file_key(n, handle.name): t.detach().to("cpu").contiguous()
        for n, t in handle.saved_tensors().items()
    }
    tensor_path = folder / TENSORS
    atomic_write(tensor_path, safetensors.torch.save(tensors))
    checksum = file_sha256(tensor_path)
    manifest = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "library_version": __version__,
        "torch_version": torch.__version__,
        "transformers_version": transformers.__version__,
        "name": handle.name,
        "kind": "fusion" if handle.is_fusion else "adapter",
        "methods": [{"name": c.name, "config": c.to_dict()} for c in handle.saved_configs],
        **({"fuses": list(handle.fused)} if handle.is_fusion else {}),
        "backbone_overrides": handle.overrides.to_dict(),
        "train_head": handle.train_head,
        "seed": handle.seed,
        "base_model": {
            "id": about.get("base_id"),
            "class": type(model).__name__,
            "model_type": getattr(config, "model_type", None),
            "fingerprint": handle.base_fingerprint,
        },
        "task": about.get("task"),
        "label_names": about.get("label_names"),
        "metrics": about.get("metrics"),
        "composition": about.get("composition"),
        "members": dict(about.get("members") or {}),
        "tensors": {
            "file": TENSORS,
            "count": len(tensors),
            "parameters": sum(t.numel() for t in tensors.values()),
            "bytes": tensor_path.stat().st_size,
            "sha256": checksum,
        },
        **({"scale": handle.training_scale.to_dict()} if handle.training_scale else {}),
        **({"chat_template": about["chat_template"]} if about.get("chat_template") else {}),
        **({"combined": about["combined"]} if about.get("combined") else {}),
        **({"heads": about["heads"]} if about.get("heads") else {}),
    }
    atomic_write(folder / MANIFEST, json.dumps(manifest, indent=2).encode())
    return checksum


def read_manifest(folder: str | os.PathLike[str]) -> dict[str, Any]:
    """The manifest of an adapter folder as JSON data, every field checked."""
    return parse_manifest(Path(folder)).raw


def file_key(name: str, adapter: str) -> str:
    """The file's name for a tensor: an inserted module's without the adapter's name."""
    return name.replace(f".{INSERTED}.{adapter}.", f".{INSERTED}_", 1)
