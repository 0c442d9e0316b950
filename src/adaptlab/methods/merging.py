"""Folding a running adapter's mergeable modules into the weights, and taking them out again.

Merging is something a method declares: its modules say how (`SiteModule.mergeable`: LoRA,
DoRA, (IA)3), its registration says that it can (`Method.mergeable`, for listings). A merged
module stays in the model and the dispatchers skip it; while anything is merged, changing
what runs is refused (the weights hold one adapter's change). A quantised layer
(`adaptlab.models.quantize`) holds no float weight to fold into: merging there is refused.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from torch import nn

from adaptlab.backbone.parts import get_module
from adaptlab.errors import ConfigError
from adaptlab.methods.handle import AdaptHandle
from adaptlab.methods.registry import METHODS
from adaptlab.models.quantize import layer_bits


def set_merged(
    model: nn.Module, handle: AdaptHandle, running: Sequence[AdaptHandle], merge: bool
) -> None:
    """Fold (merge=True) or take out the mergeable modules of `handle`, one of `running`."""
    if handle not in running:
        raise ConfigError(f"merge: adapter {handle.name!r} is not active")
    mergeable = [
        (method, i.site, i.module)
        for method, ins in handle.insertions.items()
        for i in ins
        if i.module.mergeable
    ]
    if not mergeable:
        raise ConfigError(
            f"adapter {handle.name!r} ({'+'.join(handle.method_names)}) has nothing to merge; "
            f"mergeable methods: {', '.join(METHODS.names(lambda method: method.mergeable))}"
        )
    others = {site for u in running if u is not handle for site, _, _ in u.modules()}
    for method, site, _ in mergeable:
        if site in others:
            raise ConfigError(
                f"merge: another active adapter also acts at {site!r}; merge needs it alone"
            )
        bits = layer_bits(get_module(model, site))
        if merge and bits is not None:
            raise ConfigError(
                f"cannot merge {method} into a {bits} base; load the full-precision base to merge"
            )
    for _, site, module in mergeable:
        if module.merged != merge:
            layer = get_module(model, site)
            (module.merge_into if merge else module.unmerge_from)(layer)
            module.merged = merge


def merged_names(units: Iterable[AdaptHandle]) -> list[str]:
    """Names of the `units` with a module merged into the weights."""
    return [
        u.name for u in units if any(i.module.merged for ins in u.insertions.values() for i in ins)
    ]
