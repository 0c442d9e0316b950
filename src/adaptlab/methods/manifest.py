"""An adapter folder's manifest.json, read as untrusted input: every field checked before use.

An adapter folder may come from anyone. Nothing it names is trusted: the tensor file must be
the folder's own `adapter.safetensors`, member adapters live in its own `adapters/<name>/`
subfolders (names checked), method options are validated by the methods' configs (types and
ranges) before any module is built, and the base model id is only a name (whether to load
it is the caller's decision, see `adaptlab.engine.restore`). Fields the format does not define
are refused, not skipped, and the JSON's nesting is bounded (`adaptlab.jsonfile`). Any problem
is one line naming the field.

The optional `chat_template` is the Jinja chat template the adapter was trained with, kept as
text (bounded, valid Unicode); it is only ever rendered by transformers' sandboxed Jinja
environment (`adaptlab.serve.prompts`).
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from adaptlab.errors import AdapterFileError, AdaptlabError
from adaptlab.jsonfile import read_json_file
from adaptlab.methods.blocks import Composition, composition_names, parse_composition
from adaptlab.methods.config import MethodConfig
from adaptlab.methods.configs.fusion import FUSION, fusion_config
from adaptlab.methods.manifest_combined import Combined, HeadInfo, parse_combined, parse_heads
from adaptlab.methods.registry import make_config
from adaptlab.methods.scale import PRECISIONS, TrainingScale
from adaptlab.models.quantize import QUANTIZE_KINDS
from adaptlab.version import __version__

MANIFEST = "manifest.json"
TENSORS = "adapter.safetensors"
MEMBERS = "adapters"
"""Subfolder holding the adapters a fusion or stack was trained with, one folder each."""
RUN_ADAPTER_FOLDER = "adapter"
"""Where a run folder (`adaptlab train --out`) keeps its adapter."""
FORMAT = "adaptlab-adapter"
FORMAT_VERSION = 2
READABLE_VERSIONS = (1, 2)
KINDS = ("adapter", "fusion")
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
_FINGERPRINT = re.compile(r"[0-9a-f]{16}")
_SHA256 = re.compile(r"[0-9a-f]{64}")
_MAX_SEED = 2**63 - 1
_FIELDS = {
    1: (
        "format", "format_version", "library_version", "torch_version", "transformers_version",
        "methods", "backbone_overrides", "train_head", "seed", "base_model", "task",
        "label_names", "metrics", "tensors",
    ),
    2: (
        "format", "format_version", "library_version", "torch_version", "transformers_version",
        "name", "kind", "methods", "backbone_overrides", "train_head", "seed", "base_model",
        "task", "label_names", "metrics", "composition", "members", "tensors", "scale",
        "chat_template", "combined", "heads",
    ),
}  # fmt: skip
"""The fields of a manifest of each format version (a fusion's also has `fuses`; `scale` is
optional, written since adaptlab learnt quantised bases, and so is `chat_template`, written
for an adapter trained on chats; `combined` and `heads` are written for a combined adapter,
`adaptlab.methods.manifest_combined`)."""
MAX_CHAT_TEMPLATE_BYTES = 64 * 1024
"""The most UTF-8 bytes a manifest's chat template may hold (real ones take a few KiB)."""
_BASE_FIELDS = ("id", "class", "model_type", "fingerprint")
_TENSOR_FIELDS = ("file", "count", "parameters", "bytes", "sha256")
_VERSIONS = ("library_version", "torch_version", "transformers_version")


@dataclass(frozen=True)
class TensorInfo:
    """What the manifest says of the tensor file (its checksum is checked on load)."""

    count: int
    parameters: int
    bytes: int
    sha256: str


@dataclass(frozen=True)
class BaseModelInfo:
    """The base model the adapter was trained on."""

    id: str | None
    model_class: str
    model_type: str | None
    fingerprint: str


@dataclass(frozen=True)
class Manifest:
    """A checked manifest. `members`: adapter name -> the checksum of its tensor file."""

    name: str
    kind: str
    configs: tuple[MethodConfig, ...]
    fuses: tuple[str, ...]
    backbone_overrides: dict[str, Any]
    train_head: bool
    seed: int
    base_model: BaseModelInfo
    task: str | None
    label_names: tuple[str, ...] | None
    metrics: dict[str, Any] | None
    composition: Composition | None
    members: dict[str, str]
    tensors: TensorInfo
    raw: dict[str, Any]
    scale: TrainingScale | None = None
    chat_template: str | None = None
    combined: Combined | None = None
    """How a combined adapter was made (`adaptlab.methods.combine`)."""
    heads: dict[str, HeadInfo] | None = None
    """A combined adapter's heads by source name, when its sources had different labels."""


def adapter_folder(path: str | os.PathLike[str]) -> Path:
    """`path` itself if it holds a manifest, else its `adapter/` subfolder (a run folder)."""
    folder = Path(path)
    if not folder.exists():
        raise AdapterFileError(f"{folder}: no such adapter or run folder")
    if not (folder / MANIFEST).is_file() and (folder / RUN_ADAPTER_FOLDER / MANIFEST).is_file():
        return folder / RUN_ADAPTER_FOLDER
    return folder


def read_manifest_file(folder: Path) -> dict[str, Any]:
    """The JSON object in `folder`'s manifest, checked for format and version only."""
    path = folder / MANIFEST
    if not path.is_file():
        raise AdapterFileError(f"{folder}: no {MANIFEST}; not an adaptlab adapter folder")
    data = read_json_file(path, AdapterFileError)
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise AdapterFileError(f"{path}: not an adaptlab adapter manifest")
    version = data.get("format_version")
    if version not in READABLE_VERSIONS or isinstance(version, bool):
        raise AdapterFileError(
            f"{path}: adapter format version {version!r} is not supported by adaptlab "
            f"{__version__} (reads {', '.join(map(str, READABLE_VERSIONS))})"
        )
    return data


def parse_manifest(folder: Path) -> Manifest:
    """`folder`'s manifest, every field checked; one line naming the first bad field."""
    data = read_manifest_file(folder)
    path = folder / MANIFEST
    fields = _Fields(data, path)
    version = data["format_version"]
    name = fields.text("name", pattern=NAME) if version >= 2 else "default"
    kind = fields.choice("kind", KINDS) if version >= 2 else "adapter"
    fields.only((*_FIELDS[version], *(("fuses",) if kind == "fusion" else ())))
    for key in _VERSIONS:
        fields.text(key, optional=True)
    configs = fields.configs(kind)
    fuses = fields.names("fuses") if kind == "fusion" else ()
    if kind == "fusion" and not fuses:
        raise AdapterFileError(f"{path}: a fusion must name the adapters it fuses (fuses)")
    composition = fields.composition() if version >= 2 else None
    members = fields.members() if version >= 2 else {}
    needed = set(fuses) | set(composition_names(composition)) - {name}
    missing = sorted(needed - set(members))
    if missing:
        raise AdapterFileError(f"{path}: adapter {missing[0]!r} is used but not among members")
    task = fields.text("task", optional=True)  # known or not: adaptlab.tasks.adapter_manifest
    labels = fields.labels()
    heads = parse_heads(data.get("heads"), path)
    if heads is not None and (labels is not None or fields.boolean("train_head")):
        raise AdapterFileError(
            f"{path}: an adapter with heads has none of its own: train_head must be false and "
            "label_names null"
        )
    base = fields.mapping("base_model")
    base_fields = _Fields(base, path, prefix="base_model.")
    base_fields.only(_BASE_FIELDS)
    return Manifest(
        name=name,
        kind=kind,
        configs=configs,
        fuses=fuses,
        backbone_overrides=fields.mapping("backbone_overrides"),
        train_head=fields.boolean("train_head"),
        seed=fields.integer("seed", 0, _MAX_SEED),
        base_model=BaseModelInfo(
            id=base_fields.text("id", optional=True),
            model_class=base_fields.text("class"),
            model_type=base_fields.text("model_type", optional=True),
            fingerprint=base_fields.text("fingerprint", pattern=_FINGERPRINT),
        ),
        task=task,
        label_names=labels,
        metrics=fields.mapping("metrics", optional=True),
        composition=composition,
        members=members,
        tensors=fields.tensors(),
        raw=data,
        scale=fields.scale(),
        chat_template=fields.chat_template(),
        combined=parse_combined(data.get("combined"), path),
        heads=heads,
    )


def chat_template_problem(value: object) -> str | None:
    """None if `value` can be a manifest's chat template, else what it must be."""
    if not isinstance(value, str) or not value.strip():
        return "a non-empty string (a Jinja chat template)"
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        return "valid Unicode text (it holds an unpaired surrogate)"
    if size > MAX_CHAT_TEMPLATE_BYTES:
        return f"at most {MAX_CHAT_TEMPLATE_BYTES:,} bytes of UTF-8 (it has {size:,})"
    return None


class _Fields:
    """Typed reads of a manifest's fields, each failing with the field's name."""

    def __init__(self, data: Mapping[str, Any], path: Path, prefix: str = "") -> None:
        self.data, self.path, self.prefix = data, path, prefix

    def fail(self, key: str, expected: str) -> AdapterFileError:
        value = self.data.get(key, "<missing>")
        shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:57] + "..."
        return AdapterFileError(f"{self.path}: {self.prefix}{key} must be {expected}, got {shown}")

    def only(self, known: Collection[str]) -> None:
        """Refuse a field the format does not define, naming it."""
        unknown = sorted(set(self.data) - set(known))
        if unknown:
            raise AdapterFileError(
                f"{self.path}: unknown field '{self.prefix}{unknown[0]}'; adapter manifests have "
                "no such field: remove it, or get the folder again"
            )

    def get(self, key: str, optional: bool) -> Any:
        if key not in self.data and not optional:
            raise AdapterFileError(f"{self.path}: {self.prefix}{key} is missing")
        return self.data.get(key)

    def text(self, key: str, optional: bool = False, pattern: re.Pattern[str] | None = None) -> Any:
        value = self.get(key, optional)
        if value is None and optional:
            return None
        if not isinstance(value, str) or not value or len(value) > 1000:
            raise self.fail(key, "a non-empty string")
        if pattern is not None and not pattern.fullmatch(value):
            raise self.fail(key, f"a string matching {pattern.pattern}")
        return value

    def choice(self, key: str, options: tuple[str | None, ...]) -> Any:
        value = self.get(key, None in options)
        if value not in options or isinstance(value, bool):
            raise self.fail(key, f"one of {', '.join(str(o).lower() for o in options)}")
        return value

    def boolean(self, key: str) -> bool:
        value = self.get(key, False)
        if not isinstance(value, bool):
            raise self.fail(key, "true or false")
        return value

    def integer(self, key: str, low: int, high: int) -> int:
        value = self.get(key, False)
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise self.fail(key, f"an integer in [{low}, {high}]")
        return value

    def mapping(self, key: str, optional: bool = False) -> Any:
        value = self.get(key, optional)
        if value is None and optional:
            return None
        if not isinstance(value, dict):
            raise self.fail(key, "an object")
        return value

    def names(self, key: str) -> tuple[str, ...]:
        value = self.get(key, False)
        if not isinstance(value, list) or not all(
            isinstance(v, str) and NAME.fullmatch(v) for v in value
        ):
            raise self.fail(key, "a list of adapter names")
        return tuple(value)

    def labels(self) -> tuple[str, ...] | None:
        value = self.get("label_names", True)
        if value is None:
            return None
        if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
            raise self.fail("label_names", "a non-empty list of strings")
        if len(set(value)) != len(value):
            raise self.fail("label_names", "a list of distinct labels")
        return tuple(value)

    def configs(self, kind: str) -> tuple[MethodConfig, ...]:
        value = self.get("methods", False)
        if not isinstance(value, list) or not value:
            raise self.fail("methods", "a non-empty list of {name, config}")
        configs: list[MethodConfig] = []
        for index, item in enumerate(value):
            where = f"methods[{index}]"
            if not isinstance(item, dict) or set(item) != {"name", "config"}:
                raise self.fail("methods", f"a list of {{name, config}} ({where} is not)")
            if not isinstance(item["name"], str) or not isinstance(item["config"], dict):
                raise self.fail("methods", f"a list of {{name: str, config: object}} ({where})")
            _refuse_non_finite(item["config"], self.path, where)
            try:
                if kind == "fusion":
                    if item["name"] != FUSION:
                        raise AdapterFileError(f"{where} of a fusion must be {FUSION!r}")
                    configs.append(fusion_config(item["config"]))
                else:
                    configs.append(make_config(item["name"], item["config"]))
            except AdaptlabError as error:
                raise AdapterFileError(f"{self.path}: {where}: {error}") from None
        return tuple(configs)

    def composition(self) -> Composition | None:
        value = self.get("composition", True)
        if value is None:
            return None
        try:
            composition = parse_composition(value)
        except AdaptlabError as error:
            raise AdapterFileError(f"{self.path}: composition: {error}") from None
        for name in composition_names(composition):
            if not NAME.fullmatch(name):
                raise self.fail("composition", "made of adapter names")
        return composition

    def members(self) -> dict[str, str]:
        value = self.mapping("members")
        for name, digest in value.items():
            if not NAME.fullmatch(name) or not isinstance(digest, str):
                raise self.fail("members", "an object of adapter name -> tensor checksum")
            if not _SHA256.fullmatch(digest):
                raise self.fail("members", "an object of adapter name -> SHA-256 hex digest")
        return dict(value)

    def scale(self) -> TrainingScale | None:
        value = self.mapping("scale", optional=True)
        if value is None:
            return None
        fields = _Fields(value, self.path, prefix="scale.")
        fields.only(("precision", "base_dtype", "quantize"))
        return TrainingScale(
            precision=fields.choice("precision", PRECISIONS),
            base_dtype=fields.choice("base_dtype", PRECISIONS),
            quantize=fields.choice("quantize", (*QUANTIZE_KINDS, None)),
        )

    def chat_template(self) -> str | None:
        value = self.get("chat_template", True)
        if value is None:
            return None
        problem = chat_template_problem(value)
        if problem:
            raise self.fail("chat_template", problem)
        return str(value)

    def tensors(self) -> TensorInfo:
        info = self.mapping("tensors")
        fields = _Fields(info, self.path, prefix="tensors.")
        fields.only(_TENSOR_FIELDS)
        if info.get("file") != TENSORS:
            raise fields.fail("file", f"{TENSORS!r} (tensors are read from the folder only)")
        return TensorInfo(
            count=fields.integer("count", 0, 10**9),
            parameters=fields.integer("parameters", 0, 10**15),
            bytes=fields.integer("bytes", 0, 10**15),
            sha256=fields.text("sha256", pattern=_SHA256),
        )


def _refuse_non_finite(value: Any, path: Path, where: str) -> None:
    if isinstance(value, float) and not math.isfinite(value):
        raise AdapterFileError(f"{path}: {where} holds a non-finite number ({value})")
    if isinstance(value, dict):
        for item in value.values():
            _refuse_non_finite(item, path, where)
    if isinstance(value, list):
        for item in value:
            _refuse_non_finite(item, path, where)
