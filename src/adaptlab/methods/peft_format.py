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

An imported folder is checked as an adaptlab folder is, before any of it reaches a model
(`read_peft`): its config by `adaptlab.methods.peft_config` (every field, the task type, the
scaling), its files as the folder's own (no links, no pickle), its tensors with
`adaptlab.models.tensor_checks` and as LoRA pairs of rank r whose update (lora_alpha / r) B A
stays the size of a trained weight, and no tensor PEFT writes only for options adaptlab does not
take. On the model (`import_peft`): the task type must be the model's, `target_modules` must
name modules of the model, by PEFT's rule (a whole module name or its last parts; a string is
a regular expression over whole names), and exactly the modules the file holds LoRA pairs for
(a target without a pair, or a pair without a target, would make PEFT and adaptlab run different
adapters), and a classifier's adapter must hold the head the model makes new (else it would
classify with random weights). An export refuses what PEFT's format cannot hold: other methods,
DoRA, an adapter that runs with others (a stack, a fusion) and a classifier without its head.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import safetensors.torch
import torch
from torch import nn

from adaptlab.backbone.discovery import find_backbone
from adaptlab.backbone.linear import features, is_conv1d
from adaptlab.backbone.parts import Backbone, get_module, is_inserted
from adaptlab.backbone.roles import ROLES
from adaptlab.errors import AdapterFileError
from adaptlab.fileio import atomic_write
from adaptlab.methods.adapt import DEFAULT_ADAPTER, add_adapter, delete_adapter, get_handle
from adaptlab.methods.configs.lora import LoRAConfig
from adaptlab.methods.handle import HEAD_GROUP, AdaptHandle
from adaptlab.methods.lora import LoRA
from adaptlab.methods.params import head_parameters
from adaptlab.methods.peft_about import LOADERS, describe_export, write_about
from adaptlab.methods.peft_config import (
    CONFIG_FILE,
    PEFT_VERSION,
    REFUSED,
    TASK_TYPES,
    PeftConfig,
    folder_file,
    read_peft_config,
)
from adaptlab.methods.sliced import units
from adaptlab.methods.state import get_state
from adaptlab.models.tensor_checks import MAX_MAGNITUDE, fit_problem, read_tensor_file
from adaptlab.paths import listed

TENSOR_FILE = "adapter_model.safetensors"
PREFIX = "base_model.model."
_TASK_TYPES = {
    "ForSequenceClassification": "SEQ_CLS",
    "ForTokenClassification": "TOKEN_CLS",
    "ForCausalLM": "CAUSAL_LM",
    "ForConditionalGeneration": "SEQ_2_SEQ_LM",
}


@dataclass(frozen=True)
class PeftAdapter:
    """A PEFT LoRA folder, read and checked apart from any model (`read_peft`)."""

    folder: Path
    config: PeftConfig
    pairs: Mapping[str, tuple[torch.Tensor, torch.Tensor]]
    """Each target module's LoRA pair (A, B), by the module's name in the model."""
    head: Mapping[str, torch.Tensor]
    """The tensors of the modules `modules_to_save` names, by parameter name in the model."""


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
    if _task_type(model) in LOADERS and not handle.groups.get(HEAD_GROUP):
        raise AdapterFileError(
            f"adapter {handle.name!r} has no trained head, and PEFT would give this "
            f"{type(model).__name__} a new random one; export an adapter trained with its head"
        )
    return config


def read_peft(folder: str | os.PathLike[str]) -> PeftAdapter:
    """The PEFT LoRA adapter in `folder`, every file checked before any model is involved:
    the config (`read_peft_config`), the tensors (`read_tensor_file`), tensor names PEFT writes
    for plain LoRA, and pairs of rank r whose update stays the size of a trained weight."""
    folder = Path(folder)
    config = read_peft_config(folder)
    if not (folder / TENSOR_FILE).exists() and not (folder / TENSOR_FILE).is_symlink():
        pickled = " (adapter_model.bin holds pickle, which adaptlab does not load)"
        extra = pickled if (folder / "adapter_model.bin").exists() else ""
        raise AdapterFileError(f"{folder}: no {TENSOR_FILE}{extra}")
    path = folder_file(folder, TENSOR_FILE)
    layers: dict[str, dict[str, torch.Tensor]] = {}
    head: dict[str, torch.Tensor] = {}
    for key, tensor in read_tensor_file(path, AdapterFileError).items():
        name = key.removeprefix(PREFIX)
        if not key.startswith(PREFIX) or not name:
            raise AdapterFileError(f"{path}: tensor {key!r} is not {PREFIX}*")
        part = next((p for p in "AB" if name.endswith(f".lora_{p}.weight")), None)
        if part is not None:
            layers.setdefault(name.removesuffix(f".lora_{part}.weight"), {})[part] = tensor
        elif any(piece.startswith("lora_") for piece in name.split(".")):
            raise AdapterFileError(
                f"{path}: tensor {key!r} is one PEFT writes only for what adaptlab's LoRA does "
                "not take (DoRA, LoRA of embeddings or biases, several adapters in one file)"
            )
        else:
            head[name] = tensor
    pairs = {}
    for site, pair in layers.items():
        problem = _pair_problem(site, pair, config)
        if problem:
            raise AdapterFileError(f"{path}: {problem}; the folder was edited: get it again")
        pairs[site] = (pair["A"], pair["B"])
    return PeftAdapter(folder=folder, config=config, pairs=pairs, head=head)


def _pair_problem(site: str, pair: Mapping[str, torch.Tensor], config: PeftConfig) -> str | None:
    """What is wrong with one layer's LoRA pair: a part missing, shapes that are not
    (r, in) and (out, r), or an update (lora_alpha / r) B A past what a trained weight holds."""
    for part in "AB":
        if part not in pair:
            return f"{site!r} has no lora_{part}"
    a, b, r = pair["A"], pair["B"], config.rank
    if a.dim() != 2 or b.dim() != 2 or a.shape[0] != r or b.shape[1] != r:
        return (
            f"the LoRA pair of {site!r} has shapes {tuple(a.shape)} and {tuple(b.shape)}, "
            f"where r = {r} needs ({r}, in) and (out, {r})"
        )
    product = b.float() @ a.float()
    peak = product.abs().amax().item() * config.scaling if product.numel() else 0.0
    if not peak <= MAX_MAGNITUDE:
        return (
            f"lora_alpha / r ({config.scaling:.3g}) times lora_B @ lora_A of {site!r} reaches "
            f"{peak:.3g}, past the {MAX_MAGNITUDE:,.0f} trained weights stay under (a forward "
            "pass through it overflows)"
        )
    return None


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
    found = _task_type(model)
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


def _task_type(model: nn.Module) -> str | None:
    """PEFT's task type of `model`'s head: by its class's suffix, or for the classes named
    otherwise (GPT2LMHeadModel) by the transformers auto class that lists it."""
    from transformers.models.auto import modeling_auto as auto

    name = type(model).__name__
    found = next((t for suffix, t in _TASK_TYPES.items() if name.endswith(suffix)), None)
    if found is not None:
        return found
    heads = {
        "CAUSAL_LM": auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
        "SEQ_2_SEQ_LM": auto.MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES,
    }
    return next((t for t, classes in heads.items() if name in classes.values()), None)
