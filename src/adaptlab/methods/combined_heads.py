"""The heads a combined adapter keeps for sources of different tasks, one file each.

Adapters trained on different labels can share a body (their combined inserted modules) but
not a head: each source's head is kept as it was trained, in `heads/<source>.safetensors`
beside the body, with its task and label names in the manifest (`heads`). Loading picks one
(`load_adapter(..., head=NAME)`, `--head NAME` on the command line); its file is checked as
the body's is: checksum and size against the manifest, finite values of trained sizes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from pathlib import Path

import safetensors.torch
import torch

from adaptlab.errors import AdapterFileError, ConfigError
from adaptlab.fileio import atomic_write, file_sha256
from adaptlab.methods.manifest import Manifest
from adaptlab.methods.manifest_combined import HEADS_FOLDER, HeadInfo
from adaptlab.models.tensor_checks import read_tensor_file
from adaptlab.paths import listed


def chosen_head(manifest: Manifest, folder: Path, head: str | None) -> HeadInfo | None:
    """The head `head` names among the adapter's, None without one; one line if it has none
    of that name or no heads to choose from."""
    if head is None:
        return None
    if manifest.heads is None:
        raise ConfigError(
            f"{folder} has no heads to choose from: --head picks the head of one source of an "
            "adapter combined from sources with different labels"
        )
    if head not in manifest.heads:
        names = listed(list(manifest.heads))
        raise ConfigError(f"{folder} has no head {head!r}; its heads: {names}")
    return manifest.heads[head]


def require_head(manifest: Manifest, folder: Path, head: str | None) -> HeadInfo | None:
    """`chosen_head`, refusing an adapter with heads when none is chosen."""
    if head is None and manifest.heads is not None:
        names = list(manifest.heads)
        raise ConfigError(
            f"{folder} keeps the heads of {len(names)} sources ({listed(names)}): "
            f"choose one with --head, e.g. --head {names[0]}"
        )
    return chosen_head(manifest, folder, head)


def read_head(folder: Path, head: HeadInfo) -> dict[str, torch.Tensor]:
    """The head's tensors, once its file matches the manifest and holds trained values."""
    path = head.file(folder)
    if not path.is_file():
        raise AdapterFileError(f"{path}: missing; the adapter folder is incomplete")
    if path.stat().st_size != head.bytes or file_sha256(path) != head.sha256:
        raise AdapterFileError(f"{path}: contents do not match the manifest (edited or truncated)")
    return read_tensor_file(path, AdapterFileError)


def write_heads(
    folder: Path,
    heads: Mapping[str, Mapping[str, torch.Tensor]],
    tasks: Mapping[str, str],
    labels: Mapping[str, Sequence[str] | None],
) -> dict[str, HeadInfo]:
    """Write each source's head to `folder/heads/`; what the manifest records of them."""
    (folder / HEADS_FOLDER).mkdir(parents=True, exist_ok=True)
    written = {}
    for name, tensors in heads.items():
        data = safetensors.torch.save(
            {k: t.detach().cpu().contiguous() for k, t in tensors.items()}
        )
        names = labels[name]
        info = HeadInfo(
            name=name,
            task=tasks[name],
            label_names=tuple(names) if names else None,
            sha256=hashlib.sha256(data).hexdigest(),
            bytes=len(data),
        )
        atomic_write(info.file(folder), data)
        written[name] = info
    return written
