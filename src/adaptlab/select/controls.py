"""Control candidates that give a ranking something to rank: a re-initialised encoder and the
encoder cut to its first k blocks, written `NAME@reinit` and `NAME@firstK`.

Transferring from layer k is the same as fine-tuning the first k blocks, so first-k controls
are also how per-layer choices (one of the uses named by Xu and Kang 2023, TMI) get fine-tuned.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn
from transformers import AutoModel, PreTrainedModel

from adaptlab.backbone.discovery import find_backbone
from adaptlab.backbone.parts import get_module
from adaptlab.errors import ConfigError
from adaptlab.models.loading import LoadedModel, load_model
from adaptlab.models.quiet import quiet_transformers
from adaptlab.paths import check_new_folder, check_output_folder, existing

_CONTROL = re.compile(r"^(?P<base>.+)@(?:(?P<reinit>reinit)|first(?P<k>\d+))$")


@dataclass(frozen=True)
class Candidate:
    """A model to rank: a model name or folder, optionally turned into a control."""

    text: str
    base: str
    reinit: bool = False
    first_k: int | None = None

    @property
    def folder_name(self) -> str:
        """A file-system friendly name: `minilm-l6-first3`, `minilm-l6-reinit`."""
        stem = Path(self.base).name or self.base
        suffix = "-reinit" if self.reinit else f"-first{self.first_k}" if self.first_k else ""
        return stem + suffix


def parse_candidate(text: str) -> Candidate:
    """`NAME`, `NAME@reinit` or `NAME@firstK` (K >= 1) as a Candidate."""
    text = text.strip()
    if "@" not in text:
        if not text:
            raise ConfigError("empty model name in --models; give names separated by commas")
        return Candidate(text, text)
    match = _CONTROL.match(text)
    if match is None:
        raise ConfigError(
            f"bad candidate {text!r}: write NAME, NAME@reinit or NAME@firstK "
            "(e.g. minilm-l6@first3)"
        )
    k = match.group("k")
    if k is not None and int(k) < 1:
        raise ConfigError(f"bad candidate {text!r}: first-k needs k >= 1")
    return Candidate(
        text, match.group("base"), match.group("reinit") is not None, int(k) if k else None
    )


def parse_candidates(text: str) -> tuple[Candidate, ...]:
    """The comma-separated `--models` list as candidates: at least one, each named once."""
    candidates = tuple(parse_candidate(part) for part in text.split(",") if part.strip())
    if not candidates:
        raise ConfigError("--models is empty; give at least one model name")
    names = [candidate.text for candidate in candidates]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise ConfigError(f"--models names {', '.join(twice)} more than once; give each once")
    return candidates


def load_candidate(candidate: Candidate, seed: int = 0) -> LoadedModel:
    """The base model (AutoModel, no head) of a candidate, with its control applied."""
    loaded = load_model(candidate.base, "base")
    if candidate.reinit:
        loaded.model = reinitialised(loaded.model, seed)
    if candidate.first_k is not None:
        loaded.model = first_blocks(loaded.model, candidate.first_k)
    loaded.model_id = candidate.text
    return loaded


def reinitialised(model: PreTrainedModel, seed: int) -> PreTrainedModel:
    """A model of the same architecture with fresh random weights drawn from `seed`."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        fresh = AutoModel.from_config(model.config, dtype=torch.float32)
    return fresh.eval()


def first_blocks(model: PreTrainedModel, k: int) -> PreTrainedModel:
    """`model` cut to its embeddings and first k blocks; its config says k layers."""
    backbone = find_backbone(model)
    if not 1 <= k <= backbone.num_blocks:
        raise ConfigError(
            f"first{k}: {backbone.model_class} has {backbone.num_blocks} blocks; "
            f"pick k from 1 to {backbone.num_blocks}"
        )
    blocks = get_module(model, backbone.blocks_name)
    assert isinstance(blocks, nn.ModuleList)
    parent_name, _, attr = backbone.blocks_name.rpartition(".")
    setattr(get_module(model, parent_name), attr, nn.ModuleList(list(blocks)[:k]))
    config = model.config
    for key in ("num_hidden_layers", "n_layers"):
        if hasattr(config, key):
            setattr(config, key, k)
    layer_types = getattr(config, "layer_types", None)
    if isinstance(layer_types, list):
        config.layer_types = layer_types[:k]
    return model


def check_control_folders(candidates: Sequence[Candidate], out: Path) -> None:
    """Fail, before any model loads, unless `out` is new or empty and apart from every
    candidate's base model folder."""
    check_output_folder(out, "the control models")
    for candidate in candidates:
        check_new_folder(out / candidate.folder_name, "control model folder")
    inputs = existing([(candidate.base, "base model") for candidate in candidates])
    check_new_folder(out, "the control models folder", inputs)


def write_candidate(candidate: Candidate, out: Path, seed: int = 0) -> Path:
    """Save a candidate (control applied) as a model folder that `adaptlab train` loads."""
    loaded = load_candidate(candidate, seed)
    folder = out / candidate.folder_name
    with quiet_transformers():
        loaded.model.save_pretrained(folder)
        loaded.tokenizer.save_pretrained(folder)
    return folder
