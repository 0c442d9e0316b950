"""The public entry points: named adapters on a model, which of them run, which of them train.

    adaptlab.add_adapter(model, "sentiment", "houlsby", hidden_size=64)
    adaptlab.add_adapter(model, "topic", "pfeiffer")
    adaptlab.add_fusion(model, adaptlab.Fuse("sentiment", "topic"))
    adaptlab.train_adapter(model, "fusion")            # fusion layers (and its head) train
    adaptlab.set_active(model, adaptlab.Stack("lang", "task"))

`adapt(model, method)` is the one-adapter shortcut: it adds the adapter `default`, makes it
the one that trains and the one that runs.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import torch
from torch import nn

from adaptlab.backbone.discovery import find_backbone
from adaptlab.backbone.overrides import BackboneOverrides
from adaptlab.errors import ConfigError
from adaptlab.methods.blocks import Composition, Fuse, parse_composition
from adaptlab.methods.compose import MethodSpec, resolve
from adaptlab.methods.configs.fusion import fusion_config
from adaptlab.methods.fusion import FusionLayer
from adaptlab.methods.handle import HEAD_GROUP, AdaptHandle
from adaptlab.methods.params import head_parameters, inserted_name
from adaptlab.methods.registry import check_base_stays_frozen, get_method
from adaptlab.methods.results import ApplyContext
from adaptlab.methods.state import AdapterState, attach, get_state
from adaptlab.models.quantize import quantized_kind

DEFAULT_ADAPTER = "default"
DEFAULT_FUSION = "fusion"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")


def add_adapter(
    model: nn.Module,
    name: str,
    method: MethodSpec | Sequence[MethodSpec],
    *,
    backbone: BackboneOverrides | Mapping[str, Any] | None = None,
    train_head: bool = True,
    seed: int = 0,
    keep_initial: bool = True,
    **options: Any,
) -> AdaptHandle:
    """Add adapter `name` made by one method or a combination; it neither runs nor trains yet.

    `method` is a name ("houlsby", "lora+bitfit"), a config, {name: options} or a list of
    these; keyword `options` configure a single named method (``hidden_size=64``).
    `backbone` names modules discovery cannot find. Inserted modules are initialised from
    `seed`, so the same call gives the same start. `train_head`: the adapter has its own task
    head (a copy of the model's, trained with it). `keep_initial=False` lets an adapter that
    trains pretrained weights (full, freeze, bitfit, lnfit, the head) take the model's own
    tensors instead of copies: no memory spent, but the base model cannot be given back.
    On a quantised base (`adaptlab.models.quantize`) a method that trains its weights is refused.
    """
    configs = resolve(method, options)
    overrides = BackboneOverrides.parse(backbone)
    state = get_state(model)
    _check_new_name(state, name)
    quantized = quantized_kind(model)
    if quantized is not None:
        check_base_stays_frozen(configs, quantized)
    parts = find_backbone(model, overrides)
    ctx = ApplyContext(
        seed=seed, keep_initial=keep_initial, base=state.base_tensor if state else None
    )
    insertions: dict[str, list[Any]] = {}
    base_groups: list[tuple[str, set[str]]] = []
    no_dropout: set[str] = set()
    for config in configs:
        result = get_method(config.name).apply(model, parts, config, ctx)
        if result.insertions:
            insertions[config.name] = result.insertions
        base_groups += result.groups.items()
        no_dropout |= result.no_dropout
    if train_head and parts.head:
        base_groups.append((HEAD_GROUP, head_parameters(model, parts.head)))
    state = state or attach(model, parts)
    order = state.base_names
    claimed: set[str] = set()
    groups: dict[str, list[str]] = {}
    for config in configs:  # inserted modules first, then the pretrained weights, head last
        inserted = [
            f"{inserted_name(i.site, name, config.name)}.{n}"
            for i in insertions.get(config.name, [])
            for n, _ in i.module.named_parameters()
        ]
        if inserted:
            groups[config.name] = inserted
    for group, members in base_groups:  # a weight counts in the first group claiming it
        names = [n for n in order if n in members and n not in claimed]
        claimed.update(names)
        if names:
            groups[group] = groups.get(group, []) + names
    with state.adding():
        handle = AdaptHandle(
            name=name,
            state=state,
            backbone=parts,
            configs=configs,
            overrides=overrides,
            train_head=train_head,
            seed=seed,
            insertions=insertions,
            owned=state.own([n for n in order if n in claimed], keep_initial),
            groups=groups,
            no_dropout=tuple(sorted(no_dropout)),
        )
        return _inserted(state, handle, keep_initial)


def add_fusion(
    model: nn.Module,
    fuse: Fuse | Sequence[str],
    *,
    name: str = DEFAULT_FUSION,
    train_head: bool = True,
    seed: int = 0,
    keep_initial: bool = True,
    **options: Any,
) -> AdaptHandle:
    """Add AdapterFusion layers over the adapters of `fuse` (Pfeiffer et al. 2021).

    One fusion layer goes to every site where one of the adapters acts; `options` are
    `FusionConfig`'s (temperature, value_regularization, init_std). Train it with
    `train_adapter(model, name)`: the adapters stay frozen, the fusion layers (and its own
    head, with `train_head`) train.
    """
    fuse = fuse if isinstance(fuse, Fuse) else Fuse(*fuse)
    config = fusion_config(options)
    state = get_state(model)
    _check_new_name(state, name)
    if state is None:
        raise ConfigError(f"{fuse} fuses adapters, and this model has none; add them first")
    fuse.check_fusable(state.adapters)
    sites = dict.fromkeys(site for c in fuse.children for site, _, _ in state.units[c].modules())
    ctx = ApplyContext(seed=seed)
    layers = {
        site: FusionLayer(_width(model, site, state), config, ctx.generator(site)) for site in sites
    }
    groups = {
        "fusion": [
            f"{inserted_name(site, name, 'fusion')}.{n}"
            for site, layer in layers.items()
            for n, _ in layer.named_parameters()
        ]
    }
    head = [n for n in state.base_names if n in state.head_names] if train_head else []
    if head:
        groups[HEAD_GROUP] = head
    handle = AdaptHandle(
        name=name,
        state=state,
        backbone=state.backbone,
        configs=(config,),
        overrides=BackboneOverrides(),
        train_head=train_head,
        seed=seed,
        insertions={},
        owned=state.own(head, keep_initial),
        groups=groups,
        fused=fuse.children,
        fusion_layers=layers,
    )
    return _inserted(state, handle, keep_initial)


def adapt(
    model: nn.Module,
    method: MethodSpec | Sequence[MethodSpec],
    *,
    backbone: BackboneOverrides | Mapping[str, Any] | None = None,
    train_head: bool = True,
    seed: int = 0,
    keep_initial: bool = True,
    **options: Any,
) -> AdaptHandle:
    """Adapt `model` in place with one method or a combination; return its handle.

    The adapter is named `default`; it is the one that trains and the one that runs. See
    `add_adapter` for the arguments.
    """
    state = get_state(model)
    if state is not None and DEFAULT_ADAPTER in state.units:
        names = "+".join(state.units[DEFAULT_ADAPTER].method_names)
        raise ConfigError(
            f"this model is already adapted ({names}); add a second adapter with "
            "adaptlab.add_adapter(model, name, method)"
        )
    add_adapter(
        model,
        DEFAULT_ADAPTER,
        method,
        backbone=backbone,
        train_head=train_head,
        seed=seed,
        keep_initial=keep_initial,
        **options,
    )
    return train_adapter(model, DEFAULT_ADAPTER)


def train_adapter(model: nn.Module, name: str) -> AdaptHandle:
    """Make adapter (or fusion) `name` the only thing that trains, and make sure it runs.

    Its inserted modules and its own pretrained-weight copies (head, norms, ...) train; the
    base model and every other adapter are frozen. If the active composition does not hold
    `name`, `name` alone becomes active (set a Stack or Fuse around it before or after).
    """
    state = _state(model)
    handle = get_handle(model, name)
    running = {u.name for u in state.units_in(state.active)}
    if name not in running:
        state.activate(state.adapters.alone(handle))
    state.train(handle)
    return handle


def set_active(model: nn.Module, composition: Composition | Mapping[str, Any] | None) -> None:
    """Choose what runs: an adapter's name, a `Stack`, `Fuse` or `Parallel` block, or None.

    None runs the base model. Which adapters train is not changed (see `train_adapter`).
    """
    parsed = None if composition is None else parse_composition(composition)
    _state(model).activate(parsed)


def active(model: nn.Module) -> Composition | None:
    """What runs now: an adapter's name, a block, or None (the base model)."""
    state = get_state(model)
    return state.active if state else None


def list_adapters(model: nn.Module) -> list[str]:
    """Names of the model's adapters and fusions, in the order they were added."""
    state = get_state(model)
    return list(state.units) if state else []


def delete_adapter(model: nn.Module, name: str) -> None:
    """Take adapter (or fusion) `name` out of the model.

    If it is what runs, nothing runs afterwards; if it is part of a running block or fused by
    a fusion, that is an error naming the block or fusion.
    """
    state = _state(model)
    handle = get_handle(model, name)
    users = [u.name for u in state.units.values() if name in u.fused]
    if users:
        raise ConfigError(f"fusion {users[0]!r} fuses {name!r}; delete the fusion first")
    if state.active == state.adapters.alone(handle):
        state.activate(None)
    elif handle in state.units_in(state.active):
        raise ConfigError(f"{name!r} is part of the running {state.active}; set_active another")
    state.delete(name)
    if not state.units:
        state.detach()


def get_handle(model: nn.Module, name: str | None = None) -> AdaptHandle:
    """The handle of adapter `name`; without a name, of the model's only adapter, else of the
    one last trained or loaded by itself, else of `default`."""
    state = get_state(model)
    if state is None or not state.units:
        raise ConfigError(f"{type(model).__name__} is not adapted: call adaptlab.adapt first")
    if name is None:
        if len(state.units) == 1:
            return next(iter(state.units.values()))
        name = state.focus or (DEFAULT_ADAPTER if DEFAULT_ADAPTER in state.units else None)
        if name is None:
            raise ConfigError(f"this model has adapters {', '.join(state.units)}; name one")
    if name not in state.units:
        raise ConfigError(f"no adapter named {name!r}; adapters: {', '.join(state.units)}")
    return state.units[name]


def remove(model: nn.Module) -> None:
    """Take every adapter out: hooks and inserted modules go, all parameters train again
    (those of float dtype: a quantised base's weights cannot).

    The pretrained weights in place stay: those of the running adapters that trained them
    (full fine-tuning's, say), or the base model's.
    """
    state = _state(model)
    for name in state.merged():
        unmerge(model, name)
    state.clear()
    for parameter in model.parameters():
        if parameter.is_floating_point():
            parameter.requires_grad_(True)


@contextmanager
def disabled(model: nn.Module) -> Iterator[nn.Module]:
    """Inside the block `model` behaves as its base model; on exit the adapters run again."""
    with _state(model).deactivated() as base:
        yield base


def merge(model: nn.Module, name: str | None = None) -> None:
    """Fold the mergeable modules (LoRA) of a running adapter into the weights.

    Outputs stay the same and the folded modules cost nothing at inference; `unmerge` takes
    them out again. Methods declare whether they can merge (`SiteModule.mergeable`).
    """
    _state(model).merge(get_handle(model, name), True)


def unmerge(model: nn.Module, name: str | None = None) -> None:
    """Undo `merge`: the modules act through the site dispatchers again."""
    _state(model).merge(get_handle(model, name), False)


def fusion_weights(model: nn.Module, name: str | None = None) -> dict[str, torch.Tensor]:
    """Site -> the fusion's attention over its adapters at the last forward, (..., N)."""
    handle = get_handle(model, name or _only_fusion(model))
    if not handle.is_fusion:
        raise ConfigError(f"{handle.name!r} is not a fusion")
    weights = {site: layer.last_weights for site, layer in handle.fusion_layers.items()}
    missing = [site for site, w in weights.items() if w is None]
    if missing:
        raise ConfigError(f"fusion {handle.name!r} has not run yet; run a forward pass first")
    return {site: w for site, w in weights.items() if w is not None}


def regularization_loss(model: nn.Module) -> torch.Tensor | None:
    """What the running adapters add to the training loss (AdapterFusion's value penalty)."""
    state = get_state(model)
    return state.regularization() if state else None


def _only_fusion(model: nn.Module) -> str:
    fusions = [u.name for u in _state(model).units.values() if u.is_fusion]
    if len(fusions) != 1:
        raise ConfigError(f"name the fusion; this model has {len(fusions)}")
    return fusions[0]


def _state(model: nn.Module) -> AdapterState:
    state = get_state(model)
    if state is None:
        raise ConfigError(f"{type(model).__name__} is not adapted: call adaptlab.adapt first")
    return state


def _inserted(state: AdapterState, handle: AdaptHandle, keep_initial: bool) -> AdaptHandle:
    """`handle` inserted in `state`, its trained tensors' starting values kept first when
    `keep_initial`."""
    if keep_initial:
        handle.remember_start()
    state.insert(handle)
    return handle


def _check_new_name(state: AdapterState | None, name: str) -> None:
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ConfigError(
            f"bad adapter name {name!r}: use up to 64 letters, digits, '-' and '_', "
            "starting with a letter or digit"
        )
    if state is not None and name in state.units:
        raise ConfigError(f"this model already has an adapter named {name!r}")


def _width(model: nn.Module, site: str, state: AdapterState) -> int:
    layer = model.get_submodule(site)
    return int(getattr(layer, "out_features", state.backbone.hidden_size))
