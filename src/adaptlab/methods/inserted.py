"""Where an adapter's inserted modules live in the model: a `ModuleDict` named `adaptlab` in
each site, keyed by adapter and then method (``<site>.adaptlab.<adapter>.<method>``), so the
model's own parameter names stay untouched and each adapter's modules can be found and taken
out by name."""

from __future__ import annotations

from torch import nn

from adaptlab.backbone.parts import INSERTED, get_module
from adaptlab.errors import ConfigError
from adaptlab.methods.handle import AdaptHandle
from adaptlab.models.quantize import float_dtype


def put_modules(model: nn.Module, handle: AdaptHandle) -> None:
    """Put `handle`'s modules into the model, on the device and in the dtype and training
    mode of the site they act at (a quantised site's: that of the weights it was quantised
    from)."""
    for site, method, module in handle.modules():
        layer = get_module(model, site)
        container = getattr(layer, INSERTED, None)
        if container is None:
            if hasattr(layer, INSERTED):
                raise ConfigError(f"{site!r} already has an attribute {INSERTED!r}")
            container = nn.ModuleDict()
            layer.add_module(INSERTED, container)
        assert isinstance(container, nn.ModuleDict)
        if handle.name not in container:
            container[handle.name] = nn.ModuleDict()
        modules = container[handle.name]
        assert isinstance(modules, nn.ModuleDict)
        device = next(layer.parameters()).device
        module.train(layer.training)  # the model's mode, as if it had always been there
        modules[method] = module.to(device=device, dtype=float_dtype(layer))


def take_modules(model: nn.Module, handle: AdaptHandle) -> None:
    """Take `handle`'s modules out of the model; a site left with none loses its container."""
    for site, _, _ in handle.modules():
        layer = get_module(model, site)
        container = getattr(layer, INSERTED, None)
        if container is None:
            continue
        if handle.name in container:
            del container[handle.name]
        if len(container) == 0:
            delattr(layer, INSERTED)
