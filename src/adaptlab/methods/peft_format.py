"""LoRA adapters in PEFT's folder format (`adapter_config.json` + `adapter_model.safetensors`),
and their export, so an adapter trained here loads with `peft.PeftModel.from_pretrained`
(a PEFT LoRA adapter loads here through `adaptlab.methods.peft_read` and
`adaptlab.methods.peft_import`).

PEFT stores LoRA's pair of each target layer as ``base_model.model.<layer>.lora_A.weight``
(r x in) and ``lora_B.weight`` (out x r), the scaling being lora_alpha / r, exactly
adaptlab's A, B and alpha / r; the task head goes in `modules_to_save` and its tensors under
their own names. Only what both sides mean the same way is converted. An export also writes
what PEFT's format has no field for (the built-in alias behind the hub id, the label names, what
each saved module is) to `adaptlab.json` and a model card (`adaptlab.methods.peft_about`). An
export refuses what PEFT's format cannot hold: other methods, DoRA, an adapter that runs with
others (a stack, a fusion) and a classifier without its head.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

import safetensors.torch
import torch
from torch import nn

from adaptlab.backbone.linear import features, is_conv1d
from adaptlab.backbone.parts import get_module
from adaptlab.errors import AdapterFileError
from adaptlab.fileio import atomic_write
from adaptlab.methods.adapt import get_handle
from adaptlab.methods.configs.lora import LoRAConfig
from adaptlab.methods.handle import HEAD_GROUP, AdaptHandle
from adaptlab.methods.lora import LoRA
from adaptlab.methods.peft_about import LOADERS, describe_export, write_about
from adaptlab.methods.peft_config import CONFIG_FILE, PEFT_VERSION, REFUSED
from adaptlab.methods.peft_task_type import peft_task_type
from adaptlab.methods.sliced import units
from adaptlab.methods.state import get_state
from adaptlab.paths import listed

TENSOR_FILE = "adapter_model.safetensors"
"""A PEFT folder's tensor file (safetensors; PEFT's pickled `adapter_model.bin` is never read)."""
PREFIX = "base_model.model."
"""What PEFT's tensor names start with, before the module's name in the model."""


def export_peft(
    model: nn.Module,
    folder: str | os.PathLike[str],
    *,
    name: str | None = None,
    base_model_id: str | None = None,
    label_names: Sequence[str] | None = None,
) -> Path:
    """Write LoRA adapter `name` of `model` as a PEFT folder; its head as modules_to_save.

    `base_model_id` (default: the model config's name) becomes `base_model_name_or_path`, a
    built-in alias as its hub id; `label_names` (default: the config's) and what each saved
    module is go to `adaptlab.json` and the model card (`adaptlab.methods.peft_about`).
    What PEFT's format cannot hold is refused, naming it (`_check_exportable`).
    """
    handle = get_handle(model, name)
    config = _check_exportable(model, handle)
    tensors: dict[str, torch.Tensor] = {}
    targets = []
    ranks: dict[str, int] = {}
    conv1d = False
    for insertion in handle.insertions["lora"]:
        if insertion.module.merged:
            raise AdapterFileError(f"adapter {handle.name!r} is merged: unmerge it first")
        layer = get_module(model, insertion.site)
        conv1d = conv1d or is_conv1d(layer)
        a, b = _peft_pair(insertion.module, features(layer)[1])
        targets.append(insertion.site)
        if a.shape[0] != config.rank:
            ranks[insertion.site] = a.shape[0]
        tensors[f"{PREFIX}{insertion.site}.lora_A.weight"] = a
        tensors[f"{PREFIX}{insertion.site}.lora_B.weight"] = b
    head = handle.groups.get(HEAD_GROUP, [])
    for tensor_name in head:
        tensors[f"{PREFIX}{tensor_name}"] = handle.owned[tensor_name].detach()
    saved = list(handle.backbone.head) if head else []
    task_type = peft_task_type(model)
    about = describe_export(
        model, handle.name, handle.base_fingerprint, base_model_id, task_type, saved, label_names
    )
    peft_config = {
        "peft_type": "LORA",
        "peft_version": PEFT_VERSION,
        "task_type": task_type,
        "base_model_name_or_path": about.base_id,
        "inference_mode": True,
        "r": config.rank,
        "lora_alpha": config.alpha,
        "lora_dropout": config.dropout,
        "target_modules": targets,
        "modules_to_save": saved or None,
        "init_lora_weights": True,
        **REFUSED,
        "fan_in_fan_out": conv1d,
        "rank_pattern": ranks,
        "alpha_pattern": {site: config.alpha * rank / config.rank for site, rank in ranks.items()},
    }
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    cpu = {k: v.to("cpu").contiguous() for k, v in tensors.items()}
    atomic_write(folder / TENSOR_FILE, safetensors.torch.save(cpu))
    atomic_write(folder / CONFIG_FILE, json.dumps(peft_config, indent=2).encode())
    write_about(folder, about, "LoRA")
    return folder


def _peft_pair(module: nn.Module, width: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(lora_A, lora_B) of one layer as PEFT holds it. The k pairs of a fused layer's parts
    (`Sliced`) become one pair of rank k r (`LoRA.joint_pair`: the parts' A stacked, and a B
    that is zero but for each part's B in its own rows and its own r columns); the layer's
    alpha is k alpha, which keeps the scaling alpha / r (`rank_pattern` and `alpha_pattern`
    say so)."""
    pairs = units(module)
    loras = [m for m in pairs.values() if isinstance(m, LoRA)]
    if "" in pairs:
        return loras[0].A.detach(), loras[0].B.detach()
    with torch.no_grad():
        return LoRA.joint_pair(loras, width)


def _check_exportable(model: nn.Module, handle: AdaptHandle) -> LoRAConfig:
    """`handle`'s LoRA config, once the adapter is one PEFT's format holds as it runs here:
    plain LoRA (and its head) alone, not DoRA, not run with other adapters (a stack or a
    fusion: PEFT would run the LoRA by itself), and with its head where the model's is new."""
    extra = [g for g in handle.groups if g not in ("lora", HEAD_GROUP)]
    if handle.method_names != ("lora",) or extra:
        what = "fusion" if handle.is_fusion else "+".join(handle.method_names)
        raise AdapterFileError(f"PEFT export takes a LoRA adapter; {handle.name!r} is {what}")
    config = handle.configs[0]
    assert isinstance(config, LoRAConfig)
    if config.dora:
        raise AdapterFileError(f"PEFT export takes plain LoRA; {handle.name!r} is DoRA")
    state = get_state(model)
    running = state.units_in(state.active) if state is not None else []
    others = [unit.name for unit in running if unit is not handle]
    if others and any(unit is handle for unit in running):
        assert state is not None
        raise AdapterFileError(
            f"adapter {handle.name!r} runs with {listed([repr(n) for n in others])} as "
            f"{state.active!r}, and PEFT's format holds one LoRA adapter: PEFT would run it "
            "alone and predict otherwise; export an adapter trained by itself"
        )
    if peft_task_type(model) in LOADERS and not handle.groups.get(HEAD_GROUP):
        raise AdapterFileError(
            f"adapter {handle.name!r} has no trained head, and PEFT would give this "
            f"{type(model).__name__} a new random one; export an adapter trained with its head"
        )
    return config
