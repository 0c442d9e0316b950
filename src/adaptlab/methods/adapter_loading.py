"""Load a saved adapter folder (`adaptlab.methods.persistence`) onto a model, bare or already
adapted, with the adapters it was saved with.

Loading checks what the folder holds, not only its checksum (which whoever edits a folder
can recompute): the file's tensors must be finite, of a size trained weights have and of a
dtype adaptlab writes (`adaptlab.models.tensor_checks`), exactly as many as the manifest lists,
of the shapes the adapter's methods make on this base model, with a head only if the manifest
says one was trained and as many label names as that head has outputs. The adapter must have
been trained on this base model (its fingerprint) and, with its head, as this model class.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import torch
from torch import nn

from adaptlab.backbone.discovery import find_backbone
from adaptlab.errors import AdapterFileError
from adaptlab.fileio import file_sha256
from adaptlab.methods.adapt import add_adapter, add_fusion, delete_adapter
from adaptlab.methods.blocks import Fuse, renamed
from adaptlab.methods.combined_heads import chosen_head, read_head
from adaptlab.methods.handle import HEAD_GROUP, AdaptHandle
from adaptlab.methods.manifest import MEMBERS, TENSORS, Manifest, adapter_folder, parse_manifest
from adaptlab.methods.params import head_parameters
from adaptlab.methods.persistence import file_key
from adaptlab.methods.state import get_state
from adaptlab.models.fingerprint import fingerprint
from adaptlab.models.tensor_checks import count_problem, fit_problem, read_tensor_file


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
    present = {file_key(n, name): t for n, t in state.units[name].saved_tensors().items()}
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
    expected = {file_key(n, handle.name): t for n, t in handle.tensors().items()}
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
