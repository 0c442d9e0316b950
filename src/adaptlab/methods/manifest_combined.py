"""The manifest fields of a combined adapter (`adaptlab.methods.combine`), read as untrusted input.

`combined` says how the adapter was made: the combination (how, weights, density, rank, sign
rule, seed: `adaptlab.methods.combination.Combination`) and each source (its name, the SHA-256
of its tensor file, its weight, task and label names). `heads`, written when the sources were
trained on different labels, holds each source's head: a tensor file `heads/<name>.safetensors`
with its task, label names, checksum and size; `--head NAME` picks one.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from adaptlab.errors import AdapterFileError, AdaptlabError

HEADS_FOLDER = "heads"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
_SHA256 = re.compile(r"[0-9a-f]{64}")
_SOURCE_FIELDS = ("name", "sha256", "weight", "task", "label_names")
_HEAD_FIELDS = ("task", "label_names", "sha256", "bytes")


@dataclass(frozen=True)
class CombinedSource:
    """One adapter a combined adapter was made from."""

    name: str
    sha256: str
    weight: float
    task: str | None
    label_names: tuple[str, ...] | None

    def to_dict(self) -> dict[str, Any]:
        labels = list(self.label_names) if self.label_names else None
        return {
            "name": self.name,
            "sha256": self.sha256,
            "weight": self.weight,
            "task": self.task,
            "label_names": labels,
        }


@dataclass(frozen=True)
class Combined:
    """How a combined adapter was made: `combination` as `Combination.to_dict()` writes it."""

    combination: dict[str, Any]
    sources: tuple[CombinedSource, ...]

    def to_dict(self) -> dict[str, Any]:
        """The manifest's `combined` field."""
        return {"combination": self.combination, "sources": [s.to_dict() for s in self.sources]}


@dataclass(frozen=True)
class HeadInfo:
    """One source's head kept in a combined folder, in `heads/<name>.safetensors`."""

    name: str
    task: str
    label_names: tuple[str, ...] | None
    sha256: str
    bytes: int

    def file(self, folder: Path) -> Path:
        """The head's tensor file inside adapter folder `folder`."""
        return folder / HEADS_FOLDER / f"{self.name}.safetensors"

    def to_dict(self) -> dict[str, Any]:
        """The head as its manifest entry (without the name, which keys it)."""
        labels = list(self.label_names) if self.label_names else None
        return {
            "task": self.task,
            "label_names": labels,
            "sha256": self.sha256,
            "bytes": self.bytes,
        }


def parse_combined(value: Any, path: Path) -> Combined | None:
    """The manifest's `combined` field, checked; None when absent."""
    if value is None:
        return None
    where = f"{path}: combined"
    if not isinstance(value, dict) or set(value) != {"combination", "sources"}:
        raise AdapterFileError(f"{where} must be an object of combination and sources")
    from adaptlab.methods.combination import Combination

    combination = value["combination"]
    if not isinstance(combination, dict):
        raise AdapterFileError(f"{where}.combination must be an object")
    try:
        Combination(**{**combination, "weights": tuple(combination.get("weights") or ())})
    except (AdaptlabError, TypeError) as error:
        raise AdapterFileError(f"{where}.combination: {error}") from None
    sources = value["sources"]
    if not isinstance(sources, list) or not sources:
        raise AdapterFileError(f"{where}.sources must be a non-empty list")
    parsed = tuple(_source(item, f"{where}.sources[{i}]") for i, item in enumerate(sources))
    if len(parsed) != len(combination.get("weights") or ()):
        raise AdapterFileError(f"{where}: one weight per source, got {len(parsed)} sources")
    return Combined(combination=dict(combination), sources=parsed)


def parse_heads(value: Any, path: Path) -> dict[str, HeadInfo] | None:
    """The manifest's `heads` field, checked; None when absent."""
    if value is None:
        return None
    where = f"{path}: heads"
    if not isinstance(value, dict) or len(value) < 2:
        raise AdapterFileError(f"{where} must be an object of at least two heads by name")
    heads = {}
    for name, entry in value.items():
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise AdapterFileError(f"{where}: {str(name)[:60]!r} is not an adapter name")
        if not isinstance(entry, dict) or set(entry) != set(_HEAD_FIELDS):
            raise AdapterFileError(f"{where}.{name} must hold exactly {', '.join(_HEAD_FIELDS)}")
        task = entry["task"]
        if not _task_name(task):
            raise AdapterFileError(f"{where}.{name}.task must be a task name, got {task!r}")
        size = entry["bytes"]
        if isinstance(size, bool) or not isinstance(size, int) or not 0 < size <= 10**15:
            raise AdapterFileError(f"{where}.{name}.bytes must be a positive integer")
        heads[name] = HeadInfo(
            name=name,
            task=task,
            label_names=_labels(entry["label_names"], f"{where}.{name}.label_names"),
            sha256=_checksum(entry["sha256"], f"{where}.{name}.sha256"),
            bytes=size,
        )
    return heads


def _task_name(value: Any) -> bool:
    """Whether `value` has the form of a task's name (which task it is, readers that know the
    tasks check: the methods sit below them)."""
    return isinstance(value, str) and 0 < len(value) <= 1000


def _source(item: Any, where: str) -> CombinedSource:
    if not isinstance(item, dict) or set(item) != set(_SOURCE_FIELDS):
        raise AdapterFileError(f"{where} must hold exactly {', '.join(_SOURCE_FIELDS)}")
    name, weight, task = item["name"], item["weight"], item["task"]
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise AdapterFileError(f"{where}.name must be an adapter name, got {str(name)[:60]!r}")
    if isinstance(weight, bool) or not isinstance(weight, int | float) or not math.isfinite(weight):
        raise AdapterFileError(f"{where}.weight must be a finite number")
    if task is not None and not _task_name(task):
        raise AdapterFileError(f"{where}.task must be a task name, got {str(task)[:60]!r}")
    return CombinedSource(
        name=name,
        sha256=_checksum(item["sha256"], f"{where}.sha256"),
        weight=float(weight),
        task=task,
        label_names=_labels(item["label_names"], f"{where}.label_names"),
    )


def _checksum(value: Any, where: str) -> str:
    if not isinstance(value, str) or not _SHA256.fullmatch(value):
        raise AdapterFileError(f"{where} must be a SHA-256 hex digest")
    return value


def _labels(value: Any, where: str) -> tuple[str, ...] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        raise AdapterFileError(f"{where} must be a non-empty list of strings")
    if len(set(value)) != len(value):
        raise AdapterFileError(f"{where} must be a list of distinct labels")
    return tuple(value)


def heads_data(heads: Mapping[str, HeadInfo]) -> dict[str, Any]:
    """`heads` as the manifest writes them."""
    return {name: head.to_dict() for name, head in heads.items()}
