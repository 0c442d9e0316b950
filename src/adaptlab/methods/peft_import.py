"""A PEFT LoRA folder (read and checked by `adaptlab.methods.peft_read`) added to a model as an
adaptlab LoRA adapter, once it fits: the task type must be the model's, `target_modules` must
name modules of the model, by PEFT's rule (a whole module name or its last parts; a string is a
regular expression over whole names), and exactly the modules the file holds LoRA pairs for (a
target without a pair, or a pair without a target, would make PEFT and adaptlab run different
adapters); the targets must be block layers adaptlab's LoRA takes, a role in every block and no
fused layer; and a classifier's adapter must hold the head the model makes new (else it would
classify with random weights). PEFT adapters with DoRA, rsLoRA, per-layer ranks or bias
training are refused by `adaptlab.methods.peft_config`, naming the field.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from pathlib import Path

import torch
from torch import nn

from adaptlab.backbone.discovery import find_backbone
from adaptlab.backbone.parts import Backbone, is_inserted
from adaptlab.backbone.roles import ROLES
from adaptlab.errors import AdapterFileError
from adaptlab.methods.adapt import DEFAULT_ADAPTER, add_adapter, delete_adapter
from adaptlab.methods.configs.lora import LoRAConfig
from adaptlab.methods.handle import HEAD_GROUP, AdaptHandle
from adaptlab.methods.lora import LoRA
from adaptlab.methods.params import head_parameters
from adaptlab.methods.peft_about import LOADERS
from adaptlab.methods.peft_config import TASK_TYPES, PeftConfig
from adaptlab.methods.peft_read import PeftAdapter, read_peft
from adaptlab.methods.peft_task_type import peft_task_type
from adaptlab.models.tensor_checks import fit_problem
from adaptlab.paths import listed


def import_peft(
    model: nn.Module,
    source: PeftAdapter | str | os.PathLike[str],
    *,
    name: str = DEFAULT_ADAPTER,
) -> AdaptHandle:
    """Add the PEFT LoRA adapter `source` (a folder, or one `read_peft` read) to `model` as
    adapter `name`, tensors loaded; a refusal, with nothing added, when it does not fit.

    Which base model the folder names is not compared here (the caller chose `model`); the
    command line compares it with `--model` (`adaptlab.methods.peft_config.check_base`).
    """
    adapter = source if isinstance(source, PeftAdapter) else read_peft(source)
    config = adapter.config
    found = peft_task_type(model)
    if found != config.task_type:
        raise AdapterFileError(
            f"{config.path}: task_type {config.task_type} is {TASK_TYPES[config.task_type]}, "
            f"but the model is a {type(model).__name__}; load the base model for that task"
        )
    parts = find_backbone(model)
    roles = _roles(parts, set(adapter.pairs), adapter.folder)
    _check_targets(model, config, set(adapter.pairs), set(adapter.head))
    if config.task_type in LOADERS:
        _check_head(model, parts.head, adapter)
    lora = LoRAConfig(rank=config.rank, alpha=config.alpha, dropout=config.dropout, targets=roles)
    handle = add_adapter(model, name, lora, train_head=bool(adapter.head))
    problem = _fill(handle, adapter)
    if problem:
        delete_adapter(model, name)
        raise AdapterFileError(f"{adapter.folder}: {problem}")
    return handle


def _check_head(model: nn.Module, head_modules: Sequence[str], adapter: PeftAdapter) -> None:
    """A classifier's adapter holds every tensor of the head the model makes new (those outside
    its pretrained base); without them it would classify with random weights."""
    prefix = f"{getattr(model, 'base_model_prefix', '')}."
    new = sorted(n for n in head_parameters(model, head_modules) if not n.startswith(prefix))
    missing = [n for n in new if n not in adapter.head]
    if missing:
        saved = json.dumps(list(adapter.config.modules_to_save) or None)
        raise AdapterFileError(
            f"{adapter.folder}: a {adapter.config.task_type} adapter needs its trained head, and "
            f"the file has no {missing[0]!r} (modules_to_save: {saved}), so the model would "
            "classify with random weights; get the folder as PEFT saves it, with its head"
        )


def _fill(handle: AdaptHandle, adapter: PeftAdapter) -> str | None:
    """Copy the file's LoRA pairs and head tensors into the adapter; a description of any
    tensor that does not fit (nothing is copied then)."""
    outside = sorted(set(adapter.head) - set(handle.groups.get(HEAD_GROUP, [])))
    if outside:  # head tensors PEFT did not save keep the base model's values, as in PEFT
        return f"tensor {outside[0]!r} is neither a LoRA pair nor part of the model's head"
    modules = {i.site: i.module for i in handle.insertions["lora"]}
    for site, (a, b) in adapter.pairs.items():
        module = modules[site]
        assert isinstance(module, LoRA)
        for part, tensor, target in (("A", a, module.A), ("B", b, module.B)):
            problem = fit_problem(f"{site}.lora_{part}", tensor, target)
            if problem:
                return problem
    for tensor_name, tensor in adapter.head.items():
        problem = fit_problem(tensor_name, tensor, handle.owned[tensor_name])
        if problem:
            return problem
    with torch.no_grad():
        for site, (a, b) in adapter.pairs.items():
            module = modules[site]
            assert isinstance(module, LoRA)
            module.A.copy_(a)
            module.B.copy_(b)
        for tensor_name, tensor in adapter.head.items():
            handle.owned[tensor_name].copy_(tensor)
    return None


def _check_targets(model: nn.Module, config: PeftConfig, layers: set[str], head: set[str]) -> None:
    """`target_modules` names modules of `model`, exactly those the file has LoRA pairs for,
    and every other tensor lies in a module `modules_to_save` names."""
    path = config.path
    names = [n for n, _ in model.named_modules() if n and not is_inserted(n)]
    targeted = _targeted(model, config.target_modules, names, path)
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
    kept = {module for entry in config.modules_to_save for module in _matching(entry, names)}
    loose = sorted(t for t in head if not any(t.startswith(f"{m}.") for m in kept))
    if loose:
        raise AdapterFileError(
            f"{path}: the adapter file holds {loose[0]!r}, which is neither a LoRA pair nor in "
            "a module that modules_to_save names; the folder was edited: get it again"
        )


def _targeted(
    model: nn.Module, targets: str | Sequence[str], names: Sequence[str], path: Path
) -> set[str]:
    """The modules `target_modules` names; a refusal when it names none of them."""
    if isinstance(targets, str):  # a regular expression, checked by peft_config
        matched = {n for n in names if re.fullmatch(targets, n)}
        if not matched:
            raise AdapterFileError(
                f"{path}: target_modules {targets!r} matches no module name of this model; the "
                "adapter was made for another model: pass that one as --model"
            )
        return matched
    targeted = {module for entry in targets for module in _matching(entry, names)}
    if not targeted:
        raise AdapterFileError(
            f"{path}: target_modules {listed([repr(e) for e in targets])} match no module of "
            f"this {type(model).__name__} (its layers include {_examples(model)}); the adapter "
            "was made for another model: pass that one as --model"
        )
    return targeted


def _matching(entry: str, names: Sequence[str]) -> set[str]:
    """The modules a target entry names, by PEFT's rule: the whole name or its last parts."""
    return {n for n in names if n == entry or n.endswith(f".{entry}")}


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


def _roles(parts: Backbone, layers: set[str], folder: Path) -> tuple[str, ...]:
    """The roles the PEFT target layers play: each role in every block, or a refusal."""
    fused = sorted(layers & {part.module for b in parts.blocks for _, part in b.slices})
    if fused:
        names = [p.name for b in parts.blocks for _, p in b.slices if p.module == fused[0]]
        raise AdapterFileError(
            f"{folder}: PEFT target {fused[0]!r} is a fused layer (of {', '.join(names)}), and "
            "PEFT's one pair there updates its parts together; adaptlab's LoRA gives each part "
            "its own pair, so it cannot take this adapter"
        )
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
