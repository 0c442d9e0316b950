"""The registry: every adapter folder directly under one root folder, keyed by folder name.

A registry folder holds adapter folders (`manifest.json` + `adapter.safetensors`) or run
folders (`adaptlab train --out`, holding `adapter/`). Each becomes an entry named after its
folder, or is refused with one line saying why: a name that is not an adapter name, a
manifest that does not check (`adaptlab.methods.manifest`), no task or labels, no trained
head (a causal-LM adapter, one saved on a causal LM's class, needs neither: it generates with
the base model's LM head), another base model, more tensor bytes than the server may hold, a
symbolic link that leads out of the root. Folders are untrusted: a name is only ever looked up
here, never joined onto a path.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from adaptlab.errors import AdaptlabError, ConfigError
from adaptlab.methods.manifest import NAME, TENSORS, Manifest, adapter_folder, parse_manifest
from adaptlab.models.loading import ModelKind
from adaptlab.serve.options import megabytes
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

    @property
    def causal(self) -> bool:
        """A causal-LM adapter: it generates text (`/v1/completions`), not labels."""
        return is_causal_lm(self.manifest)

    @property
    def task(self) -> str:
        assert self.manifest.task is not None  # labelled entries without a task are refused
        return self.manifest.task

    @property
    def kind(self) -> ModelKind:
        """The kind of model it runs on: its task's, or a causal LM."""
        return CAUSAL_LM if self.causal else get_task(self.task).model_kind

    @property
    def labels(self) -> tuple[str, ...]:
        """Its label names (none for a causal LM, whatever its config's id2label held)."""
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
            entries[child.name] = _entry(child, real_root, fits_base, max_bytes)
        except AdaptlabError as error:
            refused[child.name] = str(error)
    return Registry(root=real_root, entries=entries, refused=refused)


def _entry(child: Path, root: Path, fits_base: BaseCheck, max_bytes: int | None) -> Entry:
    if not NAME.fullmatch(child.name):
        raise ConfigError(
            f"{child.name!r} is not an adapter name (letters, digits, '-', '_'; at most 64)"
        )
    _refuse_links_out(child, root)
    folder = adapter_folder(child)
    manifest = parse_manifest(folder)
    if not is_causal_lm(manifest):
        if not manifest.task:
            raise ConfigError("its manifest names no task")
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
    return Entry(name=child.name, folder=folder.resolve(), manifest=manifest, bytes=size)


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
