"""Put a run's adapters on its model: one new adapter, a fusion over trained ones, or a new
adapter stacked on frozen ones; the adapter to train is returned, trainable and running."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from torch import nn

from adaptlab.errors import ConfigError
from adaptlab.methods.adapt import (
    DEFAULT_ADAPTER,
    DEFAULT_FUSION,
    adapt,
    add_adapter,
    add_fusion,
    set_active,
    train_adapter,
)
from adaptlab.methods.adapter_loading import load_adapter
from adaptlab.methods.blocks import Fuse, Stack
from adaptlab.methods.handle import AdaptHandle
from adaptlab.methods.manifest import RUN_ADAPTER_FOLDER, adapter_folder
from adaptlab.methods.persistence import read_manifest
from adaptlab.records.spec import RunSpec


def attach_adapters(model: nn.Module, spec: RunSpec, *, train_head: bool = True) -> AdaptHandle:
    """The adapter `spec` trains, added to `model` with the frozen ones it builds on;
    `train_head`: the model's head trains with it (a generative run's pretrained LM head does
    not)."""
    seed = spec.train.seed
    if spec.fusion is not None:
        names = load_frozen(model, spec.fuse)
        add_fusion(
            model,
            Fuse(*names),
            name=DEFAULT_FUSION,
            seed=seed,
            train_head=train_head,
            **spec.fusion.to_dict(),
        )
        return train_adapter(model, DEFAULT_FUSION)
    if spec.stack:
        names = load_frozen(model, spec.stack)
        add_adapter(model, DEFAULT_ADAPTER, spec.methods, seed=seed, train_head=train_head)
        set_active(model, Stack(*names, DEFAULT_ADAPTER))
        return train_adapter(model, DEFAULT_ADAPTER)
    return adapt(model, spec.methods, seed=seed, train_head=train_head)


def load_frozen(model: nn.Module, folders: tuple[str, ...], taken: Sequence[str] = ()) -> list[str]:
    """Load trained adapters without their heads, each named after its folder; their names.

    `taken`: names already in use on the model."""
    names: list[str] = []
    for folder in folders:
        path = adapter_folder(folder)
        name = adapter_name(path, read_manifest(path).get("name"))
        if name in names or name in (DEFAULT_ADAPTER, DEFAULT_FUSION, *taken):
            raise ConfigError(
                f"two adapters would both be called {name!r} ({folder}); give the run folders "
                "distinct names"
            )
        load_adapter(model, path, name=name, activate=False, with_head=False)
        names.append(name)
    return names


def adapter_name(folder: Path, saved: str | None) -> str:
    """The name a loaded adapter takes: its own, unless that is the generic one, then its
    run folder's (`runs/rt-houlsby/adapter` -> rt-houlsby), made a valid adapter name."""
    if saved and saved not in (DEFAULT_ADAPTER, DEFAULT_FUSION):
        return saved
    source = folder.parent if folder.name == RUN_ADAPTER_FOLDER else folder
    return as_adapter_name(source.resolve().name)


def as_adapter_name(text: str) -> str:
    """`text` made a valid adapter name (letters, digits, '-', '_'; at most 64)."""
    return re.sub(r"[^A-Za-z0-9_-]+", "-", text).strip("-_")[:64] or "adapter"
