"""Splice a module into a model as a child of the layer it modifies, run by a forward hook.

The layer keeps its own parameter names (no wrapper renames them) and transformers' forward
code runs unchanged; the inserted module's parameters appear as
``<layer>.adaptlab_<method>.<param>``.
"""

from __future__ import annotations

from torch import nn
from torch.utils.hooks import RemovableHandle

from adaptlab.backbone import get_module
from adaptlab.errors import ConfigError
from adaptlab.methods.params import INSERTED_PREFIX


def insert(
    model: nn.Module, target: str, method: str, module: nn.Module
) -> tuple[str, RemovableHandle]:
    """Attach `module` under the layer `target` and hook its `hook` onto that layer's output."""
    layer = get_module(model, target)
    child = f"{INSERTED_PREFIX}{method}"
    if hasattr(layer, child):
        raise ConfigError(f"{method}: {target!r} already carries a {method} module")
    weight = next(layer.parameters())
    layer.add_module(child, module.to(device=weight.device, dtype=weight.dtype))
    handle = layer.register_forward_hook(module.hook)  # type: ignore[arg-type]
    return f"{target}.{child}", handle


def inserted_parameters(name: str, module: nn.Module) -> set[str]:
    """Model-absolute names of the parameters of a module inserted at `name`."""
    return {f"{name}.{n}" for n, _ in module.named_parameters()}
