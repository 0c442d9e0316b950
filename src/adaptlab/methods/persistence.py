"""Save a named adapter (or fusion) as safetensors + a JSON manifest; load it onto a model.

An adapter folder holds ``adapter.safetensors`` (only the tensors the adapter trains:
inserted modules, its copies of pretrained weights, its head) and ``manifest.json``
(`adaptlab.methods.manifest`). A folder saved while the adapter ran inside a Stack or Fuse
also holds the other adapters of that composition, each in ``adapters/<name>/``, with their
checksums in the manifest: a fusion folder carries the adapters it was trained with, so it
loads onto a bare base model by itself, and a fusion whose adapter is missing or changed is
refused. No pickle anywhere.

Loading checks what the folder holds, not only its checksum (which whoever edits a folder
can recompute): the file's tensors must be finite, of a size trained weights have and of a
dtype adaptlab writes (`adaptlab.models.tensor_checks`), exactly as many as the manifest lists,
of the shapes the adapter's methods make on this base model, with a head only if the manifest
says one was trained and as many label names as that head has outputs.

Tensor names in the file do not depend on the adapter's name: an inserted module's
parameters are stored as ``<site>.adaptlab_<method>.<param>`` (what format 1 wrote too) and
pretrained-weight copies under the model's own parameter names.

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

from adaptlab.backbone.discovery import find_backbone
from adaptlab.backbone.parts import INSERTED
from adaptlab.errors import AdapterFileError, ConfigError
from adaptlab.fileio import atomic_write, file_sha256
from adaptlab.methods.adapt import add_adapter, add_fusion, delete_adapter, get_handle
from adaptlab.methods.blocks import Block, Fuse, renamed
from adaptlab.methods.combined_heads import chosen_head, read_head
from adaptlab.methods.handle import HEAD_GROUP, AdaptHandle
from adaptlab.methods.manifest import (
    FORMAT,
    FORMAT_VERSION,
    MANIFEST,
    MEMBERS,
    TENSORS,
    Manifest,
    adapter_folder,
    chat_template_problem,
    parse_manifest,
)
from adaptlab.methods.manifest_combined import Combined, HeadInfo, heads_data
from adaptlab.methods.params import head_parameters
from adaptlab.methods.state import AdapterState, get_state
from adaptlab.models.fingerprint import fingerprint
from adaptlab.models.tensor_checks import count_problem, fit_problem, read_tensor_file
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
        _file_key(n, handle.name): t.detach().to("cpu").contiguous()
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


def load_adapter(
    model: nn.Module,
    folder: str | os.PathLike[str],
    *,
    name: str | None = None,
    activate: bool = True,
    with_head: bool = True,
    head: str | None = None,
) -> nn.Module:
    """Add the adapter saved in `folder` (an adapter folder, or a run folder holding one in
    `adapter/`) to `model` (bare or already adapted) and load it.

    `name` renames it (default: the name it was saved under). The adapters it was saved with
    (a fusion's, a stack's) are loaded too, unless the model already has them, which is
    then checked to be the same tensors. With `activate`, what ran when it was saved runs
    and the model's label names become the adapter's. `with_head=False` leaves the saved
    head out (an adapter trained on other labels, to fuse or stack under another task).
    `head`: which of a combined adapter's heads to load (`adaptlab.methods.combine`: sources of
    different tasks keep their heads, by source name); without it such an adapter loads
    without a head.
    """
    folder = adapter_folder(folder)
    manifest = parse_manifest(folder)
    chosen = chosen_head(manifest, folder, head)
    train_head = (manifest.train_head or chosen is not None) and with_head
    _check_base(model, manifest, folder, same_class=train_head)
    tensors = _tensors_to_load(model, folder, manifest, manifest.train_head and with_head)
    if chosen is not None and with_head:
        head_tensors = read_head(folder, chosen)
        body = sorted(_without_heads(model, head_tensors, manifest))
        if body:
            raise AdapterFileError(
                f"{chosen.file(folder)}: holds {body[0]!r}, which is no head tensor; the folder "
                "was edited: get it again"
            )
        tensors = {**tensors, **head_tensors}
    for member, checksum in manifest.members.items():
        _load_member(model, folder / MEMBERS / member, member, checksum)
    name = name or manifest.name
    if manifest.kind == "fusion":
        handle = add_fusion(
            model,
            Fuse(*manifest.fuses),
            name=name,
            train_head=train_head,
            seed=manifest.seed,
            **manifest.configs[0].to_dict(),
        )
    else:
        handle = add_adapter(
            model,
            name,
            manifest.configs,
            backbone=manifest.backbone_overrides,
            train_head=train_head,
            seed=manifest.seed,
        )
    config = getattr(model, "config", None)
    labels = chosen.label_names if chosen is not None else manifest.label_names
    outputs = getattr(config, "num_labels", None)
    sized = len(labels) if train_head and labels and len(labels) == outputs else None
    handle.training_scale = manifest.scale
    problem = _fill(handle, tensors, sized)
    if problem:
        delete_adapter(model, name)
        raise AdapterFileError(f"{folder}: {problem}")
    if labels and handle.train_head and len(labels) != (outputs or len(labels)):
        delete_adapter(model, name)
        raise AdapterFileError(
            f"{folder}: label_names has {len(labels)} names, the model's head {outputs} outputs"
        )
    if activate:
        state = get_state(model)
        assert state is not None  # the adapter was just added
        if labels and config is not None and handle.train_head:
            config.id2label = dict(enumerate(labels))
            config.label2id = {label: i for i, label in enumerate(labels)}
        state.focus = name
        composition = manifest.composition
        if composition is not None and name != manifest.name:
            composition = renamed(composition, manifest.name, name)
        state.activate(composition or state.adapters.alone(handle))
    return model


def _tensors_to_load(
    model: nn.Module, folder: Path, manifest: Manifest, train_head: bool
) -> dict[str, torch.Tensor]:
    """The folder's tensors (`_read_tensors`), less the head's unless `train_head`; a file with
    a head whose manifest says none was trained is refused."""
    tensors = _read_tensors(folder, manifest)
    body = _without_heads(model, tensors, manifest)
    if not manifest.train_head and len(body) < len(tensors):
        head = sorted(set(tensors) - set(body))
        raise AdapterFileError(
            f"{folder / TENSORS}: holds head tensor {head[0]!r}, but the manifest says the head "
            "was not trained (train_head false); the folder was edited: get it again"
        )
    return tensors if train_head else body


def source_head(model: nn.Module, folder: str | os.PathLike[str]) -> dict[str, torch.Tensor]:
    """The head tensors of the adapter saved in `folder`, by parameter name in `model` (a model
    of the adapter's base); empty when it trained no head."""
    folder = adapter_folder(folder)
    manifest = parse_manifest(folder)
    tensors = _read_tensors(folder, manifest)
    body = _without_heads(model, tensors, manifest)
    return {k: t for k, t in tensors.items() if k not in body}


def _without_heads(
    model: nn.Module, tensors: Mapping[str, torch.Tensor], manifest: Manifest
) -> dict[str, torch.Tensor]:
    """`tensors` less any head's: this model's head, and (for an adapter trained with another
    head class, a language adapter's masked-LM head say) whatever lies outside its base model."""
    parts = find_backbone(model, manifest.backbone_overrides)
    head = head_parameters(model, parts.head)
    prefix = getattr(model, "base_model_prefix", "")
    body = f"{prefix}." if prefix and isinstance(getattr(model, prefix, None), nn.Module) else ""
    return {k: t for k, t in tensors.items() if k not in head and k.startswith(body)}


def _check_base(model: nn.Module, manifest: Manifest, folder: Path, same_class: bool) -> None:
    """The adapter was trained on this base model (and, with its head, this model class)."""
    base = manifest.base_model
    if same_class and type(model).__name__ != base.model_class:
        raise AdapterFileError(
            f"{folder}: adapter was saved from a {base.model_class}, this model is a "
            f"{type(model).__name__}; load the base model with the same task class"
        )
    state = get_state(model)
    if state is not None:
        found = state.fingerprint
    else:
        parts = find_backbone(model, manifest.backbone_overrides)
        found = fingerprint(model, exclude=parts.head)
    if found != base.fingerprint:
        raise AdapterFileError(
            f"{folder}: adapter was trained on base {base.id!r} (fingerprint "
            f"{base.fingerprint}), this model's fingerprint is {found}; load the same base model"
        )


def _load_member(model: nn.Module, folder: Path, name: str, checksum: str) -> None:
    """Load a member adapter, or check that the model's adapter of that name is the same."""
    if not folder.is_dir():
        raise AdapterFileError(f"{folder}: missing; the adapter {name!r} it names is not there")
    manifest = parse_manifest(folder)
    if manifest.tensors.sha256 != checksum:
        raise AdapterFileError(
            f"{folder}: adapter {name!r} has changed since the folder above it was saved"
        )
    state = get_state(model)
    if state is None or name not in state.units:
        load_adapter(model, folder, name=name, activate=False)
        return
    saved = _read_tensors(folder, manifest)
    present = {_file_key(n, name): t for n, t in state.units[name].saved_tensors().items()}
    same = set(saved) == set(present) and all(
        torch.equal(saved[n], present[n].detach().to("cpu")) for n in saved
    )
    if not same:
        raise AdapterFileError(
            f"{folder}: the model's adapter {name!r} is not the one this folder was saved with"
        )


def _fill(
    handle: AdaptHandle, tensors: Mapping[str, torch.Tensor], labels: int | None
) -> str | None:
    """Copy the file's tensors into the adapter; a description of any mismatch. `labels`: how
    many label names the manifest has, when the model's head was sized for them (a head tensor
    of another shape then means that the adapter's head and its label names disagree)."""
    expected = {_file_key(n, handle.name): t for n, t in handle.tensors().items()}
    missing = sorted(set(expected) - set(tensors))
    if missing:
        return f"tensor {missing[0]!r} is missing from the adapter ({len(missing)} missing)"
    unexpected = sorted(set(tensors) - set(expected))
    if unexpected:
        return f"tensor {unexpected[0]!r} in the adapter has no place in this model"
    head = set(handle.groups.get(HEAD_GROUP, ()))
    for key, tensor in tensors.items():
        problem = fit_problem(key, tensor, expected[key])
        if problem and labels and key in head:
            return (
                f"{problem}, whose head has an output for each of the {labels} label_names: "
                "the adapter's head and its label_names disagree"
            )
        if problem:
            return problem
    with torch.no_grad():
        for key, tensor in tensors.items():
            expected[key].copy_(tensor)
    return None


def _file_key(name: str, adapter: str) -> str:
    """The file's name for a tensor: an inserted module's without the adapter's name."""
    return name.replace(f".{INSERTED}.{adapter}.", f".{INSERTED}_", 1)


def _read_tensors(folder: Path, manifest: Manifest) -> dict[str, torch.Tensor]:
    """The folder's tensors, once the file matches the manifest's checksum and size and holds
    what the manifest lists and values a trained adapter has (`read_tensor_file`)."""
    path = folder / TENSORS
    if not path.is_file():
        raise AdapterFileError(f"{path}: missing; the adapter folder is incomplete")
    if file_sha256(path) != manifest.tensors.sha256:
        raise AdapterFileError(f"{path}: contents do not match the manifest (corrupt or truncated)")
    size = path.stat().st_size
    if size != manifest.tensors.bytes:
        raise AdapterFileError(
            f"{path}: the manifest lists {manifest.tensors.bytes:,} bytes (tensors.bytes), the "
            f"file has {size:,}; the folder was edited: get it again"
        )
    tensors = read_tensor_file(path, AdapterFileError)
    problem = count_problem(tensors, manifest.tensors.count, manifest.tensors.parameters)
    if problem:
        raise AdapterFileError(f"{path}: {problem}; the folder was edited: get it again")
    return tensors
