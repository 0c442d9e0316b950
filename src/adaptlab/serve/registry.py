"""The registry: every adapter folder directly under one root folder, keyed by folder name.

A registry folder holds adapter folders (`manifest.json` + `adapter.safetensors`) or run
folders (`adaptlab train --out`, holding `adapter/`). Each becomes an entry named after its
folder, or is refused with one line saying why: a name that is not an adapter name, a
manifest that does not check (`adaptlab.methods.manifest`), no task or labels, no trained
head (a causal-LM adapter, one saved on a causal LM's class, needs neither: it generates with
the base model's LM head), another base model, more tensor bytes than the server may hold, a
symbolic link that leads out of the root. Folders are untrusted: a name is only ever looked up
here, never joined onto a path.

An adapter combined from sources with different labels (`adaptlab.methods.combined_heads`)
becomes one entry per head, named `<folder>-<source>`: the shared body with that source's head.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from adaptlab.errors import AdaptlabError, ConfigError
from adaptlab.methods.manifest import NAME, TENSORS, Manifest, adapter_folder
from adaptlab.methods.manifest_combined import HeadInfo
from adaptlab.models.loading import ModelKind
from adaptlab.serve.options import megabytes
from adaptlab.tasks.adapter_manifest import read_adapter_manifest
from adaptlab.tasks.registry import get_task

CAUSAL_LM: ModelKind = "causal_lm"

BaseCheck = Callable[[Manifest], str | None]
"""Given a manifest: None if the served base model fits it, else why not."""


@dataclass(frozen=True)
class Entry:
    """One servable adapter: its registry name, folder and checked manifest."""

    name: str
    folder: Path
    manifest: Manifest
    bytes: int
    """Size of every tensor file it loads (its own and its members')."""
    head: HeadInfo | None = None
    """The head it runs with, for one head of an adapter that keeps several."""

    @property
    def causal(self) -> bool:
        """A causal-LM adapter: it generates text (`/v1/completions`), not labels."""
        return is_causal_lm(self.manifest)

    @property
    def task(self) -> str:
        if self.head is not None:
            return self.head.task
        assert self.manifest.task is not None  # labelled entries without a task are refused
        return self.manifest.task

    @property
    def kind(self) -> ModelKind:
        """The kind of model it runs on: its task's, or a causal LM."""
        return CAUSAL_LM if self.causal else get_task(self.task).model_kind

    @property
    def labels(self) -> tuple[str, ...]:
        """Its label names (none for a causal LM, whatever its config's id2label held)."""
        if self.head is not None:
            return self.head.label_names or ()
        return () if self.causal else self.manifest.label_names or ()

    @property
    def composed(self) -> bool:
        """A fusion or stack: it brings other adapters with it."""
        return bool(self.manifest.members)

    def describe(self) -> dict[str, Any]:
        """What `GET /adapters` shows of it."""
        manifest = self.manifest
        return {
            "name": self.name,
            "task": CAUSAL_LM if self.causal else manifest.task,
            "labels": list(self.labels),
            "method": "+".join(c.name for c in manifest.configs),
            "kind": manifest.kind,
            **({"head": self.head.name} if self.head is not None else {}),
            "bytes": self.bytes,
            "base_model": manifest.base_model.id,
            "base_fingerprint": manifest.base_model.fingerprint,
            "metrics": manifest.metrics,
        }


@dataclass(frozen=True)
class Registry:
    """The entries found under `root`, and the folders refused with their reason."""

    root: Path
    entries: dict[str, Entry]
    refused: dict[str, str]


def scan_registry(
    root: str | os.PathLike[str], fits_base: BaseCheck, max_bytes: int | None = None
) -> Registry:
    """Every adapter or run folder directly under `root`, checked; `fits_base` checks bases,
    and an adapter whose tensors exceed `max_bytes` is refused."""
    folder = Path(root)
    if folder.is_file():
        raise ConfigError(f"--adapters {folder} is a file; give the folder that holds the adapters")
    if not folder.is_dir():
        raise ConfigError(f"--adapters {folder}: no such folder")
    real_root = folder.resolve()
    entries: dict[str, Entry] = {}
    refused: dict[str, str] = {}
    for child in sorted(folder.iterdir(), key=lambda p: p.name):
        if not child.is_dir() or child.name.startswith("."):
            continue
        try:
            found = _entries(child, real_root, fits_base, max_bytes)
        except AdaptlabError as error:
            refused[child.name] = str(error)
            continue
        for entry in found:
            if entry.name in entries:
                refused[entry.name] = f"two adapters are named {entry.name!r}; rename a folder"
                del entries[entry.name]
            elif entry.name not in refused:
                entries[entry.name] = entry
    return Registry(root=real_root, entries=entries, refused=refused)


def _entries(child: Path, root: Path, fits_base: BaseCheck, max_bytes: int | None) -> list[Entry]:
    """The entry of folder `child`, or one per head of an adapter that keeps several."""
    if not NAME.fullmatch(child.name):
        raise ConfigError(
            f"{child.name!r} is not an adapter name (letters, digits, '-', '_'; at most 64)"
        )
    _refuse_links_out(child, root)
    folder = adapter_folder(child)
    manifest = read_adapter_manifest(folder)
    if not is_causal_lm(manifest) and manifest.heads is None:
        if not manifest.task:
            raise ConfigError("its manifest names no task")
        if get_task(manifest.task).model_kind == "seq2seq_lm":
            raise ConfigError(
                "it is a seq2seq adapter: the server generates with causal LMs only; answer "
                "with adaptlab predict"
            )
        if get_task(manifest.task).named_labels and not manifest.label_names:
            raise ConfigError("its manifest names no labels")
        if not manifest.train_head:
            raise ConfigError("it has no trained head (saved with train_head=false)")
    problem = fits_base(manifest)
    if problem:
        raise ConfigError(problem)
    size = sum(p.stat().st_size for p in folder.rglob(TENSORS) if p.is_file())
    if max_bytes is not None and size > max_bytes:
        raise ConfigError(
            f"its tensors take {megabytes(size)} MB, above --max-loaded-mb {megabytes(max_bytes)}"
        )
    if manifest.heads is None:
        return [Entry(name=child.name, folder=folder.resolve(), manifest=manifest, bytes=size)]
    named = {f"{child.name}-{head}": info for head, info in manifest.heads.items()}
    too_long = [name for name in named if not NAME.fullmatch(name)]
    if too_long:
        raise ConfigError(f"its head's entry name {too_long[0]!r} is longer than 64 characters")
    return [
        Entry(name, folder.resolve(), manifest, size + info.bytes, head=info)
        for name, info in named.items()
    ]


def is_causal_lm(manifest: Manifest) -> bool:
    """Whether the adapter was saved on a causal LM (LlamaForCausalLM, GPT2LMHeadModel, ...)."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    base = manifest.base_model
    return MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.get(base.model_type or "") == base.model_class


def _refuse_links_out(folder: Path, root: Path) -> None:
    """Everything under `folder` (links followed) must stay inside `root`."""
    for path in [folder, *folder.rglob("*")]:
        if path.is_symlink() and not path.resolve().is_relative_to(root):
            raise ConfigError(f"{path.relative_to(folder.parent)} links outside the registry")
