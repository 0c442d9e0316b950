"""The public entry points: adapt a model, find its handle, switch it off, merge LoRA."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from torch import nn
from torch.utils.hooks import RemovableHandle

from adaptlab.backbone import BackboneOverrides, find_backbone, get_module
from adaptlab.errors import ConfigError
from adaptlab.methods.compose import MethodSpec, resolve
from adaptlab.methods.handle import AdaptHandle, Switch
from adaptlab.methods.params import parameters_under
from adaptlab.methods.registry import get_method
from adaptlab.methods.results import ApplyContext
from adaptlab.models.fingerprint import fingerprint

_HANDLE_ATTRIBUTE = "_adaptlab_handle"


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

    `method` is a name ("houlsby", "lora+bitfit"), a config, {name: options} or a list of
    these; keyword `options` configure a single named method (``hidden_size=64``).
    `backbone` names modules discovery cannot find. Inserted modules are initialised from
    `seed`, so the same call gives the same start. `keep_initial` keeps a copy of every
    trainable tensor's starting value, which `disabled` needs for methods that train
    pretrained weights (full, freeze, bitfit, lnfit, the head).
    """
    if hasattr(model, _HANDLE_ATTRIBUTE):
        names = "+".join(get_handle(model).method_names)
        raise ConfigError(f"this model is already adapted ({names}); start from a fresh base model")
    configs = resolve(method, options)
    overrides = BackboneOverrides.parse(backbone)
    parts = find_backbone(model, overrides)
    base_fingerprint = fingerprint(model, exclude=parts.head)
    switch = Switch()
    ctx = ApplyContext(switch=switch, seed=seed)

    requires_grad = {n: p.requires_grad for n, p in model.named_parameters()}
    model.requires_grad_(False)
    groups: dict[str, set[str]] = {}
    inserted: dict[str, dict[str, nn.Module]] = {}
    hooks: list[RemovableHandle] = []
    try:
        for config in configs:
            result = get_method(config.name).apply(model, parts, config, ctx)
            for group, members in result.groups.items():
                groups.setdefault(group, set()).update(members)
            inserted[config.name] = result.inserted
            hooks += result.hooks
    except BaseException:
        _take_out(model, hooks, inserted)
        for name, param in model.named_parameters():
            param.requires_grad_(requires_grad[name])
        raise
    if train_head and parts.head:
        groups["head"] = parameters_under(model, parts.head)

    params = dict(model.named_parameters())
    claimed: set[str] = set()
    ordered: dict[str, list[str]] = {}
    for group, members in groups.items():  # a parameter counts in the first group claiming it
        ordered[group] = [n for n in params if n in members and n not in claimed]
        claimed.update(ordered[group])
    for name in claimed:
        params[name].requires_grad_(True)

    handle = AdaptHandle(
        model=model,
        backbone=parts,
        configs=configs,
        overrides=overrides,
        train_head=train_head,
        seed=seed,
        base_fingerprint=base_fingerprint,
        groups={g: names for g, names in ordered.items() if names},
        inserted=inserted,
        hooks=hooks,
        switch=switch,
        initial={n: params[n].detach().clone() for n in claimed} if keep_initial else None,
    )
    object.__setattr__(model, _HANDLE_ATTRIBUTE, handle)
    return handle


def get_handle(model: nn.Module) -> AdaptHandle:
    """The handle of an adapted model, or a one-line error if it was never adapted."""
    handle = getattr(model, _HANDLE_ATTRIBUTE, None)
    if handle is None:
        raise ConfigError(f"{type(model).__name__} is not adapted: call adaptlab.adapt first")
    return handle


def remove(model: nn.Module) -> None:
    """Take an adaptation out: hooks and inserted modules go, all parameters train again.

    Pretrained weights that were trained keep their trained values.
    """
    handle = get_handle(model)
    _take_out(model, handle.hooks, handle.inserted)
    object.__delattr__(model, _HANDLE_ATTRIBUTE)
    model.requires_grad_(True)


def _take_out(
    model: nn.Module, hooks: list[RemovableHandle], inserted: Mapping[str, Mapping[str, nn.Module]]
) -> None:
    """Remove hooks and inserted child modules."""
    for hook in hooks:
        hook.remove()
    for modules in inserted.values():
        for name in modules:
            parent, child = name.rsplit(".", 1)
            delattr(get_module(model, parent), child)


@contextmanager
def disabled(model: nn.Module) -> Iterator[nn.Module]:
    """Inside the block `model` behaves as its base model; on exit adaptation is back."""
    with get_handle(model).disabled() as base:
        yield base


def merge(model: nn.Module) -> None:
    """Fold LoRA updates into the weights (faster inference, same outputs)."""
    for target, lora in _lora_modules(model):
        lora.merge(get_module(model, target))


def unmerge(model: nn.Module) -> None:
    """Undo `merge`: LoRA updates are applied by hooks again."""
    for target, lora in _lora_modules(model):
        lora.unmerge(get_module(model, target))


def _lora_modules(model: nn.Module) -> Iterator[tuple[str, Any]]:
    modules = get_handle(model).inserted.get("lora")
    if not modules:
        raise ConfigError("merge/unmerge need a LoRA adaptation; this model has none")
    for name, module in modules.items():
        yield name.rsplit(".", 1)[0], module
