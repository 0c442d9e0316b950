"""Parameter-name helpers: canonical names (tied weights once), by module, bias or norm."""

from __future__ import annotations

from collections.abc import Iterable

from torch import nn

from adaptlab.backbone.discovery import is_norm
from adaptlab.backbone.parts import INSERTED, get_module, is_inserted


def inserted_name(site: str, adapter: str, method: str) -> str:
    """Model-absolute name of the module `method` of `adapter` inserted at `site`."""
    return f"{site}.{INSERTED}.{adapter}.{method}"


def canonical_names(model: nn.Module) -> dict[int, str]:
    """id(parameter) -> the name `named_parameters` gives it (each tied tensor once)."""
    return {id(p): n for n, p in model.named_parameters()}


def parameters_under(model: nn.Module, module_names: Iterable[str]) -> set[str]:
    """Canonical names of every parameter inside the named modules."""
    names = canonical_names(model)
    return {names[id(p)] for m in module_names for p in get_module(model, m).parameters()}


def head_parameters(model: nn.Module, head: Iterable[str]) -> set[str]:
    """Canonical names of the task head's own parameters: inside the `head` modules and used
    nowhere else (a masked-LM output layer tied to the input embeddings belongs to the body)."""
    prefixes = tuple(f"{m}." for m in head)
    elsewhere = {
        id(p)
        for n, p in model.named_parameters(remove_duplicate=False)
        if not n.startswith(prefixes)
    }
    names = canonical_names(model)
    return {
        names[id(p)]
        for m in head
        for p in get_module(model, m).parameters()
        if id(p) not in elsewhere
    }


def pretrained_names(model: nn.Module) -> set[str]:
    """Canonical names of the model's own parameters (nothing adaptlab inserted)."""
    return {n for n, _ in model.named_parameters() if not is_inserted(n)}


def bias_names(model: nn.Module) -> set[str]:
    """Pretrained bias terms (BitFit's parameters)."""
    return {n for n in pretrained_names(model) if n.rsplit(".", 1)[-1] == "bias"}


def norm_names(model: nn.Module) -> set[str]:
    """Parameters of every LayerNorm / RMSNorm in the model."""
    norms = [n for n, m in model.named_modules() if is_norm(m) and not is_inserted(n)]
    return parameters_under(model, norms)
