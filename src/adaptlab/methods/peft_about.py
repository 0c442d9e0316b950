"""What a PEFT folder exported by adaptlab says beyond PEFT's own `adapter_config.json`, so a
PEFT user can load it as it is and knows what it holds.

- The base model: `base_model_name_or_path` is the id PEFT and the hub know; a built-in alias
  (`minilm-l6`) becomes its hub id (`adaptlab.models.builtin`), the alias kept in `adaptlab.json`.
- The label names: PEFT's format has no field for them and neither PEFT nor transformers reads
  them from an adapter folder (a base model's config is where transformers reads `id2label`),
  so `adaptlab.json` holds them (`label_names`, and `id2label` / `label2id` as a config.json
  writes them) for the keyword arguments `AutoPeftModelForSequenceClassification.from_pretrained`
  passes on to the base model (the model card shows how; PEFT issue 1486 asked for a field).
- The saved modules: `modules_to_save` may name pretrained parts of the base model that trained
  with the head (BERT's pooler); `adaptlab.json` and the model card say which is which.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torch import nn

from adaptlab.fileio import atomic_write
from adaptlab.models.builtin import BUILTIN_MODELS
from adaptlab.version import __version__

ABOUT_FILE = "adaptlab.json"
CARD_FILE = "README.md"
ABOUT_FORMAT = "adaptlab-peft-export"
HEAD = "the task head"
BASE_PART = "a pretrained part of the base model, trained with the head (this copy replaces it)"
LOADERS = {
    "SEQ_CLS": "AutoPeftModelForSequenceClassification",
    "TOKEN_CLS": "AutoPeftModelForTokenClassification",
}
"""PEFT task types whose head has an output per label, and PEFT's class that loads them."""


@dataclass(frozen=True)
class ExportAbout:
    """What `adaptlab.json` records about an exported PEFT folder."""

    adapter: str
    base_id: str | None
    """What `base_model_name_or_path` says: a hub id or a folder."""
    alias: str | None
    """adaptlab's built-in name of the base model, when it is one."""
    model_class: str
    task_type: str | None
    fingerprint: str
    label_names: tuple[str, ...]
    saved_modules: Mapping[str, str]
    """Each module of `modules_to_save`, and what it is (HEAD or BASE_PART)."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": ABOUT_FORMAT,
            "library_version": __version__,
            "adapter": self.adapter,
            "base_model": {
                "id": self.base_id,
                "adaptlab_name": self.alias,
                "class": self.model_class,
                "fingerprint": self.fingerprint,
            },
            "label_names": list(self.label_names) or None,
            **(_label_maps(self.label_names) if self.label_names else {}),
            "modules_to_save": dict(self.saved_modules),
        }


def _label_maps(labels: Sequence[str]) -> dict[str, Any]:
    """`id2label` and `label2id` as a transformers config.json writes them."""
    return {
        "id2label": {str(i): label for i, label in enumerate(labels)},
        "label2id": {label: i for i, label in enumerate(labels)},
    }


def describe_export(
    model: nn.Module,
    adapter: str,
    fingerprint: str,
    base_model_id: str | None,
    task_type: str | None,
    saved_modules: Sequence[str],
    label_names: Sequence[str] | None,
) -> ExportAbout:
    """What to record for adapter `adapter` of `model` exported for PEFT."""
    config = getattr(model, "config", None)
    base_id = base_model_id or getattr(config, "name_or_path", None) or None
    builtin = BUILTIN_MODELS.get(base_id) if base_id else None
    labels: Sequence[str] = ()
    if task_type in LOADERS:
        id2label = getattr(config, "id2label", None) or {}
        labels = label_names or [id2label[i] for i in sorted(id2label)]
    prefix = f"{getattr(model, 'base_model_prefix', '')}."
    return ExportAbout(
        adapter=adapter,
        base_id=builtin.hub_id if builtin else base_id,
        alias=builtin.name if builtin else None,
        model_class=type(model).__name__,
        task_type=task_type,
        fingerprint=fingerprint,
        label_names=tuple(labels),
        saved_modules={m: BASE_PART if m.startswith(prefix) else HEAD for m in saved_modules},
    )


def write_about(folder: Path, about: ExportAbout, method: str) -> None:
    """Write `adaptlab.json` and a model card (`README.md`, what the hub shows) to `folder`."""
    atomic_write(folder / ABOUT_FILE, json.dumps(about.to_dict(), indent=2).encode())
    atomic_write(folder / CARD_FILE, _card(about, method).encode())


def _card(about: ExportAbout, method: str) -> str:
    base = about.base_id or "(not recorded: pass the base model yourself)"
    alias = f" (adaptlab's built-in `{about.alias}`)" if about.alias else ""
    lines = [
        "---",
        *([f"base_model: {about.base_id}"] if about.base_id else []),
        "library_name: peft",
        "tags: [adaptlab, lora]",
        "---",
        f"# {method} adapter `{about.adapter}`, exported by adaptlab {__version__}",
        "",
        f"Base model: {base}{alias}, {about.model_class}.",
    ]
    if about.label_names:
        names = ", ".join(f"{i} = {label}" for i, label in enumerate(about.label_names))
        lines.append(f"Labels: {names}.")
    for module, what in about.saved_modules.items():
        lines.append(f"`{module}` (in modules_to_save): {what}.")
    loader = LOADERS.get(about.task_type or "")
    if about.label_names and loader:
        lines += [
            "",
            "PEFT's format has no place for label names; give them from adaptlab.json:",
            "",
            "    import json",
            f"    from peft import {loader}",
            "",
            '    labels = json.load(open("FOLDER/adaptlab.json"))["label_names"]',
            f"    model = {loader}.from_pretrained(",
            '        "FOLDER",',
            "        id2label=dict(enumerate(labels)),",
            "        label2id={label: i for i, label in enumerate(labels)},",
            "    )",
        ]
    return "\n".join(lines) + "\n"
