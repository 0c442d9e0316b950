"""The adapters a combination is made from, read and checked before any model is loaded.

Sources combine when they are adapters of one base model (same fingerprint and model class),
trained alone (not a fusion, not saved in a Stack), of the same methods on the same backbone
parts, with the same options where the shapes or the meaning of their tensors depend on them
(LoRA may differ in rank, alpha, dropout and target layers: its pairs combine with their own
scalings, and linear, cat and the svd hows take any ranks), the same head training and chat
template. Any difference is refused in one line naming the two sources and the difference.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, fields
from pathlib import Path

from adaptlab.errors import ConfigError
from adaptlab.methods.config import MethodConfig
from adaptlab.methods.manifest import (
    NAME,
    RUN_ADAPTER_FOLDER,
    Manifest,
    adapter_folder,
    parse_manifest,
)

_LORA_FREE = ("rank", "alpha", "dropout", "targets")
"""LoRA options sources may differ in."""


@dataclass(frozen=True)
class Source:
    """One adapter to combine: its folder, checked manifest, name (its run or adapter folder's
    name, under which a kept head is stored) and weight."""

    folder: Path
    manifest: Manifest
    name: str
    weight: float

    @property
    def labels(self) -> tuple[str, ...] | None:
        """The label names of its head (None without one)."""
        return self.manifest.label_names if self.manifest.train_head else None


def read_sources(
    paths: Sequence[str | os.PathLike[str]],
    weights: Sequence[float],
    names: Sequence[str] | None = None,
) -> list[Source]:
    """The sources: at least two different adapter folders, each checked on its own and
    against the first (`check_sources`)."""
    if len(paths) < 2:
        given = f": {paths[0]}" if paths else ""
        raise ConfigError(
            f"combine needs at least two adapters, got {len(paths)}{given}; a single adapter "
            "is used as it is"
        )
    if len(weights) != len(paths):
        raise ConfigError(
            f"give one weight per adapter: {len(paths)} adapters, {len(weights)} weights"
        )
    if names is not None and len(names) != len(paths):
        raise ConfigError(f"give one name per adapter: {len(paths)} adapters, {len(names)} names")
    folders = [adapter_folder(p) for p in paths]
    _refuse_repeated_folders(paths, folders)
    chosen = list(names) if names is not None else [_folder_name(f) for f in folders]
    for name in chosen:
        if not NAME.fullmatch(name):
            raise ConfigError(
                f"{name!r} cannot name a source (letters, digits, _ and -, at most 64); "
                "name the sources with --names"
            )
    repeated = sorted({n for n in chosen if chosen.count(n) > 1})
    if repeated:
        raise ConfigError(f"two sources are named {repeated[0]!r}; name them apart with --names")
    sources = [
        Source(folder=f, manifest=parse_manifest(f), name=n, weight=float(w))
        for f, n, w in zip(folders, chosen, weights, strict=True)
    ]
    check_sources(sources)
    return sources


def _refuse_repeated_folders(
    paths: Sequence[str | os.PathLike[str]], folders: Sequence[Path]
) -> None:
    """No adapter folder is given twice (a copy of a folder is another adapter)."""
    resolved = [folder.resolve() for folder in folders]
    for index, folder in enumerate(resolved):
        if folder in resolved[:index]:
            first = resolved.index(folder)
            raise ConfigError(
                f"adapters {first + 1} and {index + 1} ({paths[first]} and {paths[index]}) are "
                f"one adapter folder, {folder}; combine different adapters"
            )


def check_sources(sources: Sequence[Source]) -> None:
    """Every source can be combined with the first; one line naming the two and the difference."""
    for source in sources:
        _check_alone(source)
    first = sources[0]
    for other in sources[1:]:
        problem = _difference(first.manifest, other.manifest)
        if problem:
            raise ConfigError(f"{first.folder} and {other.folder} {problem}: they cannot combine")


def shares_head(sources: Sequence[Source]) -> bool:
    """Whether the sources trained heads for the same labels, in the same order."""
    return sources[0].manifest.train_head and len({s.labels for s in sources}) == 1


def _check_alone(source: Source) -> None:
    manifest = source.manifest
    if manifest.kind == "fusion":
        raise ConfigError(f"{source.folder} is a fusion; combine the adapters it fuses instead")
    if manifest.composition is not None or manifest.members:
        raise ConfigError(
            f"{source.folder} was saved running with other adapters (a Stack); only adapters "
            "saved alone combine"
        )
    if manifest.heads is not None:
        raise ConfigError(
            f"{source.folder} keeps several heads; combine the adapters it was made from instead"
        )


def _difference(a: Manifest, b: Manifest) -> str | None:
    """What keeps `b` from combining with `a`, as the end of a sentence; None if nothing."""
    if a.base_model.fingerprint != b.base_model.fingerprint:
        return (
            f"were trained on different base models (fingerprints {a.base_model.fingerprint} "
            f"and {b.base_model.fingerprint})"
        )
    if a.base_model.model_class != b.base_model.model_class:
        return f"were trained as a {a.base_model.model_class} and a {b.base_model.model_class}"
    methods_a = [c.name for c in a.configs]
    methods_b = [c.name for c in b.configs]
    if methods_a != methods_b:
        return f"are of different methods ({'+'.join(methods_a)} and {'+'.join(methods_b)})"
    for config_a, config_b in zip(a.configs, b.configs, strict=True):
        problem = _config_difference(config_a, config_b)
        if problem:
            return problem
    if a.backbone_overrides != b.backbone_overrides:
        return "find the model's parts with different backbone overrides"
    if a.train_head != b.train_head:
        return "differ in training a head (train_head)"
    if a.chat_template != b.chat_template:
        return "were trained with different chat templates"
    return None


def _config_difference(a: MethodConfig, b: MethodConfig) -> str | None:
    free = _LORA_FREE if a.name == "lora" else ()
    for field in fields(a):
        if field.name in free:
            continue
        value_a, value_b = getattr(a, field.name), getattr(b, field.name)
        if value_a != value_b:
            return f"differ in {a.name}'s {field.name} ({value_a!r} and {value_b!r})"
    return None


def _folder_name(folder: Path) -> str:
    """A source's default name: its run folder's name (its own for an adapter folder)."""
    named = folder.parent if folder.name == RUN_ADAPTER_FOLDER else folder
    return re.sub(r"[^A-Za-z0-9_-]", "-", named.resolve().name)[:64].lstrip("_-") or "source"
