"""LoRA adapters to and from PEFT's folder format (`adapter_config.json` +
`adapter_model.safetensors`), so an adapter trained here loads with
`peft.PeftModel.from_pretrained` and a PEFT LoRA adapter loads here.

PEFT stores LoRA's pair of each target layer as ``base_model.model.<layer>.lora_A.weight``
(r x in) and ``lora_B.weight`` (out x r), the scaling being lora_alpha / r, exactly
adaptlab's A, B and alpha / r; the task head goes in `modules_to_save` and its tensors under
their own names. Only what both sides mean the same way is converted: a PEFT adapter with
DoRA, rsLoRA, per-layer ranks, a subset of the layers or bias training is refused, naming
the field. No pickle: a folder with only `adapter_model.bin` is refused. An export also writes
what PEFT's format has no field for (the built-in alias behind the hub id, the label names, what
each saved module is) to `adaptlab.json` and a model card (`adaptlab.methods.peft_about`).

An imported folder is checked as an adaptlab folder is: its tensors with
`adaptlab.models.tensor_checks`, its config as bounded JSON whose every field adaptlab knows
(a field of a later PEFT is accepted only while unset). `target_modules` must name modules of
the model, by PEFT's rule (a whole module name or its last parts; a string is a regular
expression over whole names), and exactly the modules the file holds LoRA pairs for: a target
without a pair, or a pair without a target, would make PEFT and adaptlab run different adapters.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import safetensors.torch
import torch
from torch import nn

from adaptlab.backbone import ROLES, find_backbone, is_inserted
from adaptlab.errors import AdapterFileError
from adaptlab.fileio import atomic_write
from adaptlab.jsonfile import parse_json
from adaptlab.methods.adapt import DEFAULT_ADAPTER, add_adapter, delete_adapter, get_handle
from adaptlab.methods.configs.lora import LoRAConfig
from adaptlab.methods.handle import HEAD_GROUP, AdaptHandle
from adaptlab.methods.lora import LoRA
from adaptlab.methods.peft_about import describe_export, write_about
from adaptlab.models.tensor_checks import fit_problem, read_tensor_file
from adaptlab.paths import listed

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
_READ = ("peft_type", "r", "lora_alpha", "lora_dropout", "target_modules", "modules_to_save")
_ABOUT = (
    "task_type", "auto_mapping", "peft_version", "base_model_name_or_path", "revision",
    "inference_mode", "layers_pattern", "megatron_core", "qalora_group_size",
)  # fmt: skip
"""Fields that say where the adapter came from, or matter only with an option refused above."""
_PLAIN_INITS = (True, False, "gaussian")
"""init_lora_weights values that leave the base weights alone (PiSSA, OLoRA, LoftQ... change
them, so their adapters only work on the changed base)."""
_UNSET: tuple[Any, ...] = (None, False, {}, [])
"""Values of an option that is off: a field adaptlab does not know is accepted only so."""


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
    """
    handle = get_handle(model, name)
    extra = [g for g in handle.groups if g not in ("lora", HEAD_GROUP)]
    if handle.method_names != ("lora",) or extra:
        what = "fusion" if handle.is_fusion else "+".join(handle.method_names)
        raise AdapterFileError(f"PEFT export takes a LoRA adapter; {handle.name!r} is {what}")
    config = handle.configs[0]
    assert isinstance(config, LoRAConfig)
    if config.dora:
        raise AdapterFileError(f"PEFT export takes plain LoRA; {handle.name!r} is DoRA")
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
    saved = list(handle.backbone.head) if head else []
    task_type = _task_type(model)
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
        **_REFUSED,
    }
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    cpu = {k: v.to("cpu").contiguous() for k, v in tensors.items()}
    atomic_write(folder / TENSOR_FILE, safetensors.torch.save(cpu))
    atomic_write(folder / CONFIG_FILE, json.dumps(peft_config, indent=2).encode())
    write_about(folder, about, "LoRA")
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
    _check_targets(model, config, set(layers), set(head), folder / CONFIG_FILE)
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
    handle: AdaptHandle,
    layers: Mapping[str, Mapping[str, torch.Tensor]],
    head: Mapping[str, torch.Tensor],
) -> str | None:
    """Copy the file's LoRA pairs and head tensors into the adapter; a description of any
    tensor that does not fit (nothing is copied then)."""
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
            problem = fit_problem(f"{site}.lora_{part}", pair[part], target)
            if problem:
                return problem
    for tensor_name, tensor in head.items():
        problem = fit_problem(tensor_name, tensor, handle.owned[tensor_name])
        if problem:
            return problem
    with torch.no_grad():
        for site, pair in layers.items():
            module = pairs[site]
            assert isinstance(module, LoRA)
            module.A.copy_(pair["A"])
            module.B.copy_(pair["B"])
        for tensor_name, tensor in head.items():
            handle.owned[tensor_name].copy_(tensor)
    return None


def _check_targets(
    model: nn.Module, config: Mapping[str, Any], layers: set[str], head: set[str], path: Path
) -> None:
    """`target_modules` names modules of `model`, exactly those the file has LoRA pairs for,
    and every other tensor lies in a module `modules_to_save` names."""
    names = [n for n, _ in model.named_modules() if n and not is_inserted(n)]
    targeted = _targeted(model, config.get("target_modules"), names, path)
    unpaired = sorted(targeted - layers)
    if unpaired:
        raise AdapterFileError(
            f"{path}: target_modules names {unpaired[0]!r}, but the adapter file holds no LoRA "
            f"pair for it ({len(unpaired)} such); the folder is incomplete or was edited"
        )
    untargeted = sorted(layers - targeted)
    if untargeted:
        raise AdapterFileError(
            f"{path}: the adapter file holds a LoRA pair for {untargeted[0]!r}, which "
            "target_modules does not name; the folder was edited: get it again"
        )
    saved = _names(config.get("modules_to_save"), "modules_to_save", path, optional=True)
    kept = {module for entry in saved for module in _matching(entry, names)}
    loose = sorted(t for t in head if not any(t.startswith(f"{m}.") for m in kept))
    if loose:
        raise AdapterFileError(
            f"{path}: the adapter file holds {loose[0]!r}, which is neither a LoRA pair nor in "
            "a module that modules_to_save names; the folder was edited: get it again"
        )


def _targeted(model: nn.Module, targets: Any, names: Sequence[str], path: Path) -> set[str]:
    """The modules `target_modules` names; a refusal when it names none of them."""
    if isinstance(targets, str):
        return _matching_pattern(targets, names, path)
    entries = _names(targets, "target_modules", path, optional=False)
    targeted = {module for entry in entries for module in _matching(entry, names)}
    if not targeted:
        raise AdapterFileError(
            f"{path}: target_modules {listed([repr(e) for e in entries])} match no module of "
            f"this {type(model).__name__} (its layers include {_examples(model)}); the adapter "
            "was made for another model: pass that one as --model"
        )
    return targeted


def _names(value: Any, key: str, path: Path, optional: bool) -> list[str]:
    """A config field that lists module names (None: none, where `optional`)."""
    if value is None and optional:
        return []
    ok = isinstance(value, list) and (optional or value)
    if not ok or not all(isinstance(v, str) and v for v in value):
        shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:57] + "..."
        raise AdapterFileError(f"{path}: {key} must be a list of module names, got {shown}")
    return list(value)


def _matching(entry: str, names: Sequence[str]) -> set[str]:
    """The modules a target entry names, by PEFT's rule: the whole name or its last parts."""
    return {n for n in names if n == entry or n.endswith(f".{entry}")}


def _matching_pattern(pattern: str, names: Sequence[str], path: Path) -> set[str]:
    """The modules a `target_modules` string names: a regular expression over whole names."""
    try:
        matched = {n for n in names if re.fullmatch(pattern, n)}
    except re.error as error:
        raise AdapterFileError(
            f"{path}: target_modules {pattern!r} is not a regular expression ({error})"
        ) from None
    if not matched:
        raise AdapterFileError(
            f"{path}: target_modules {pattern!r} matches no module name of this model; the "
            "adapter was made for another model: pass that one as --model"
        )
    return matched


def _examples(model: nn.Module) -> str:
    """A few names a target entry could take: the last parts of the model's weight layers."""
    embeddings = {n for n, m in model.named_modules() if isinstance(m, nn.Embedding)}
    layers = [
        n.removesuffix(".weight")
        for n, p in model.named_parameters()
        if n.endswith(".weight") and p.dim() == 2 and not is_inserted(n)
    ]
    found = dict.fromkeys(n.rsplit(".", 1)[-1] for n in layers if n not in embeddings)
    return listed([repr(n) for n in found], most=5)


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
    """The folder's adapter_config.json, with every option adaptlab cannot reproduce refused."""
    path = folder / CONFIG_FILE
    if not path.is_file():
        raise AdapterFileError(f"{folder}: no {CONFIG_FILE}; not a PEFT adapter folder")
    try:
        config = parse_json(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise AdapterFileError(f"{path}: cannot be read ({error.strerror})") from None
    except ValueError as error:  # not JSON, not UTF-8, or nested too deep
        raise AdapterFileError(f"{path}: not valid JSON ({error})") from None
    if not isinstance(config, dict) or config.get("peft_type") != "LORA":
        raise AdapterFileError(f"{path}: not a PEFT LoRA adapter (peft_type must be LORA)")
    for key, accepted in _REFUSED.items():
        value = config.get(key, accepted)
        if value != accepted and not (accepted == {} and value is None):
            raise AdapterFileError(
                f"{path}: {key}={value!r} has no equivalent in adaptlab's LoRA (only {accepted!r})"
            )
    init = config.get("init_lora_weights", True)
    if not any(init is p if isinstance(p, bool) else init == p for p in _PLAIN_INITS):
        raise AdapterFileError(
            f"{path}: init_lora_weights={init!r} has no equivalent in adaptlab's LoRA "
            "(only true, false or 'gaussian': the others change the base model's weights)"
        )
    for key, value in config.items():
        if key not in (*_READ, *_ABOUT, *_REFUSED, "init_lora_weights") and value not in _UNSET:
            shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
            raise AdapterFileError(
                f"{path}: unknown field {key!r} set to {shown}; adaptlab knows the LoRA fields "
                f"of PEFT up to {PEFT_VERSION} and cannot tell what this one changes"
            )
    return config


def _read_tensors(folder: Path) -> dict[str, torch.Tensor]:
    path = folder / TENSOR_FILE
    if not path.is_file():
        pickled = " (adapter_model.bin holds pickle, which adaptlab does not load)"
        extra = pickled if (folder / "adapter_model.bin").exists() else ""
        raise AdapterFileError(f"{folder}: no {TENSOR_FILE}{extra}")
    return read_tensor_file(path, AdapterFileError)


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
