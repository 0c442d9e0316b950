"""LoRA adapters to and from PEFT's folder format (`adapter_config.json` +
`adapter_model.safetensors`), so an adapter trained here loads with
`peft.PeftModel.from_pretrained` and a PEFT LoRA adapter loads here.

PEFT stores LoRA's pair of each target layer as ``base_model.model.<layer>.lora_A.weight``
(r x in) and ``lora_B.weight`` (out x r), the scaling being lora_alpha / r, exactly
adaptlab's A, B and alpha / r; the task head goes in `modules_to_save` and its tensors under
their own names. Only what both sides mean the same way is converted: a PEFT adapter with
DoRA, rsLoRA, per-layer ranks, a subset of the layers or bias training is refused, naming
the field. No pickle: a folder with only `adapter_model.bin` is refused.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import safetensors.torch
import torch
from torch import nn

from adaptlab.backbone import ROLES, find_backbone
from adaptlab.errors import AdapterFileError
from adaptlab.fileio import atomic_write
from adaptlab.methods.adapt import DEFAULT_ADAPTER, add_adapter, delete_adapter, get_handle
from adaptlab.methods.handle import HEAD_GROUP, AdaptHandle
from adaptlab.methods.lora import LoRA, LoRAConfig

CONFIG_FILE = "adapter_config.json"
TENSOR_FILE = "adapter_model.safetensors"
PREFIX = "base_model.model."
PEFT_VERSION = "0.21.2"
_TASK_TYPES = {
    "ForSequenceClassification": "SEQ_CLS",
    "ForTokenClassification": "TOKEN_CLS",
    "ForCausalLM": "CAUSAL_LM",
}
_REFUSED = {
    "use_dora": False,
    "use_rslora": False,
    "lora_bias": False,
    "fan_in_fan_out": False,
    "bias": "none",
    "layers_to_transform": None,
    "rank_pattern": {},
    "alpha_pattern": {},
}
"""PEFT options adaptlab's LoRA has no equivalent of, with the only value accepted."""


def export_peft(
    model: nn.Module,
    folder: str | os.PathLike[str],
    *,
    name: str | None = None,
    base_model_id: str | None = None,
) -> Path:
    """Write LoRA adapter `name` of `model` as a PEFT folder; its head as modules_to_save."""
    handle = get_handle(model, name)
    extra = [g for g in handle.groups if g not in ("lora", HEAD_GROUP)]
    if handle.method_names != ("lora",) or extra:
        what = "fusion" if handle.is_fusion else "+".join(handle.method_names)
        raise AdapterFileError(f"PEFT export takes a LoRA adapter; {handle.name!r} is {what}")
    config = handle.configs[0]
    assert isinstance(config, LoRAConfig)
    tensors: dict[str, torch.Tensor] = {}
    targets = []
    for insertion in handle.insertions["lora"]:
        module = insertion.module
        assert isinstance(module, LoRA)
        if module.merged:
            raise AdapterFileError(f"adapter {handle.name!r} is merged: unmerge it first")
        targets.append(insertion.site)
        tensors[f"{PREFIX}{insertion.site}.lora_A.weight"] = module.A.detach()
        tensors[f"{PREFIX}{insertion.site}.lora_B.weight"] = module.B.detach()
    head = handle.groups.get(HEAD_GROUP, [])
    for tensor_name in head:
        tensors[f"{PREFIX}{tensor_name}"] = handle.owned[tensor_name].detach()
    peft_config = {
        "peft_type": "LORA",
        "peft_version": PEFT_VERSION,
        "task_type": _task_type(model),
        "base_model_name_or_path": base_model_id,
        "inference_mode": True,
        "r": config.rank,
        "lora_alpha": config.alpha,
        "lora_dropout": config.dropout,
        "target_modules": targets,
        "modules_to_save": list(handle.backbone.head) if head else None,
        "init_lora_weights": True,
        **_REFUSED,
    }
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    cpu = {k: v.to("cpu").contiguous() for k, v in tensors.items()}
    atomic_write(folder / TENSOR_FILE, safetensors.torch.save(cpu))
    atomic_write(folder / CONFIG_FILE, json.dumps(peft_config, indent=2).encode())
    return folder


def import_peft(
    model: nn.Module, folder: str | os.PathLike[str], *, name: str = DEFAULT_ADAPTER
) -> AdaptHandle:
    """Add the PEFT LoRA adapter in `folder` to `model` as adapter `name`, tensors loaded."""
    folder = Path(folder)
    config = _read_config(folder)
    tensors = _read_tensors(folder)
    layers: dict[str, dict[str, torch.Tensor]] = {}
    head: dict[str, torch.Tensor] = {}
    for key, tensor in tensors.items():
        if not key.startswith(PREFIX):
            raise AdapterFileError(f"{folder / TENSOR_FILE}: tensor {key!r} is not {PREFIX}*")
        path = key.removeprefix(PREFIX)
        for part in ("A", "B"):
            if path.endswith(f".lora_{part}.weight"):
                layers.setdefault(path.removesuffix(f".lora_{part}.weight"), {})[part] = tensor
                break
        else:
            head[path] = tensor
    parts = find_backbone(model)
    roles = _roles(parts, set(layers), folder)
    lora = LoRAConfig(
        rank=_number(config, "r", int, folder),
        alpha=float(_number(config, "lora_alpha", float, folder)),
        dropout=float(_number(config, "lora_dropout", float, folder)),
        targets=roles,
    )
    handle = add_adapter(model, name, lora, train_head=bool(head))
    problem = _fill(handle, layers, head)
    if problem:
        delete_adapter(model, name)
        raise AdapterFileError(f"{folder}: {problem}")
    return handle


def _fill(
    handle: AdaptHandle, layers: Mapping[str, Mapping[str, torch.Tensor]], head: Mapping[str, Any]
) -> str | None:
    outside = sorted(set(head) - set(handle.groups.get(HEAD_GROUP, [])))
    if outside:  # head tensors PEFT did not save keep the base model's values, as in PEFT
        return f"tensor {outside[0]!r} is neither a LoRA pair nor part of the model's head"
    pairs = {i.site: i.module for i in handle.insertions["lora"]}
    for site, pair in layers.items():
        module = pairs[site]
        assert isinstance(module, LoRA)
        for part, target in (("A", module.A), ("B", module.B)):
            if part not in pair:
                return f"{site} has no lora_{part}"
            if tuple(pair[part].shape) != tuple(target.shape):
                return (
                    f"{site}.lora_{part} has shape {tuple(pair[part].shape)}, "
                    f"this model needs {tuple(target.shape)}"
                )
    with torch.no_grad():
        for site, pair in layers.items():
            module = pairs[site]
            assert isinstance(module, LoRA)
            module.A.copy_(pair["A"])
            module.B.copy_(pair["B"])
        for tensor_name, tensor in head.items():
            owned = handle.owned[tensor_name]
            if tuple(tensor.shape) != tuple(owned.shape):
                return f"head tensor {tensor_name!r} has shape {tuple(tensor.shape)}"
            owned.copy_(tensor)
    return None


def _roles(parts: Any, layers: set[str], folder: Path) -> tuple[str, ...]:
    """The roles the PEFT target layers play: each role in every block, or a refusal."""
    role_of = {module: role for role in ROLES for module in parts.modules_with_role(role)}
    unknown = sorted(layers - set(role_of))
    if unknown:
        raise AdapterFileError(
            f"{folder}: PEFT target {unknown[0]!r} is not a block layer adaptlab's LoRA targets "
            f"({', '.join(ROLES)})"
        )
    roles = tuple(role for role in ROLES if any(role_of[m] == role for m in layers))
    for role in roles:
        missing = sorted(set(parts.modules_with_role(role)) - layers)
        if missing:
            raise AdapterFileError(
                f"{folder}: the PEFT adapter targets {role} in some blocks only ({missing[0]!r} "
                "has none); adaptlab's LoRA takes a role in every block"
            )
    if not roles:
        raise AdapterFileError(f"{folder}: the PEFT adapter has no LoRA tensors")
    return roles


def _read_config(folder: Path) -> dict[str, Any]:
    path = folder / CONFIG_FILE
    if not path.is_file():
        raise AdapterFileError(f"{folder}: no {CONFIG_FILE}; not a PEFT adapter folder")
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise AdapterFileError(f"{path}: not valid JSON ({error})") from None
    if not isinstance(config, dict) or config.get("peft_type") != "LORA":
        raise AdapterFileError(f"{path}: not a PEFT LoRA adapter (peft_type must be LORA)")
    for key, accepted in _REFUSED.items():
        value = config.get(key, accepted)
        if value != accepted and not (accepted == {} and value is None):
            raise AdapterFileError(
                f"{path}: {key}={value!r} has no equivalent in adaptlab's LoRA (only {accepted!r})"
            )
    return config


def _read_tensors(folder: Path) -> dict[str, torch.Tensor]:
    path = folder / TENSOR_FILE
    if not path.is_file():
        pickled = " (adapter_model.bin holds pickle, which adaptlab does not load)"
        extra = pickled if (folder / "adapter_model.bin").exists() else ""
        raise AdapterFileError(f"{folder}: no {TENSOR_FILE}{extra}")
    try:
        return safetensors.torch.load_file(str(path))
    except Exception as error:  # safetensors raises its own error types for bad headers
        raise AdapterFileError(f"{path}: cannot be read as safetensors ({error})") from None


def _number(config: Mapping[str, Any], key: str, kind: type, folder: Path) -> Any:
    value = config.get(key)
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    if kind is int:
        ok = ok and isinstance(value, int)
    if not ok or not math.isfinite(value):  # type: ignore[arg-type]
        raise AdapterFileError(f"{folder / CONFIG_FILE}: {key} must be a number, got {value!r}")
    return value


def _task_type(model: nn.Module) -> str | None:
    name = type(model).__name__
    return next((t for suffix, t in _TASK_TYPES.items() if name.endswith(suffix)), None)
