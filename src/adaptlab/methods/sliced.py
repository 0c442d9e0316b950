"""One method's modules at a fused layer, each acting on the rows of its own part.

On a fused query-key-value layer (GPT-2's c_attn, GPT-NeoX's query_key_value) "LoRA on query
and value" is two updates, one confined to the query's rows and one to the value's, as on a
model with separate projections; (IA)3 rescales the key's and the value's rows. Those modules
share one site, so they sit in one `Sliced` container there, named by part
(``<site>.adaptlab.<adapter>.lora.query.A``), and act one after the other on the layer's output.
`insert_parts` makes one module per part a method targets and groups them by layer.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

import torch
from torch import nn

from adaptlab.backbone.parts import Part
from adaptlab.methods.rowwise import RowWise
from adaptlab.methods.site import Insertion, SiteModule


class Sliced(SiteModule):
    """Modules of one method at one fused layer, each on its part's rows (all mergeable)."""

    mergeable = True

    def __init__(self, parts: Mapping[str, SiteModule]) -> None:
        super().__init__()
        for name, module in parts.items():
            assert module.mergeable, f"{type(module).__name__} cannot sit in a Sliced layer"
            self.add_module(name, module)

    @property
    def parts(self) -> dict[str, SiteModule]:
        """Part name -> its module, in the layer's order."""
        return {name: module for name, module in self.named_children()}  # type: ignore[misc]

    def output(self, h: torch.Tensor, x: torch.Tensor, site: nn.Module) -> torch.Tensor:
        parts = list(self.parts.values())
        if isinstance(parts[0], RowWise):
            joint = type(parts[0]).joint_output(parts, h, x)  # type: ignore[arg-type]
            if joint is not None:
                return joint
        for module in parts:
            h = module.output(h, x, site)
        return h

    def saved_tensors(self) -> dict[str, torch.Tensor]:
        return {
            f"{name}.{key}": tensor
            for name, module in self.parts.items()
            for key, tensor in module.saved_tensors().items()
        }

    def merge_into(self, layer: nn.Module) -> None:
        for module in self.parts.values():
            module.merge_into(layer)

    def unmerge_from(self, layer: nn.Module) -> None:
        for module in reversed(self.parts.values()):
            module.unmerge_from(layer)


def units(module: nn.Module | None) -> dict[str, nn.Module]:
    """The modules acting at a site: a Sliced container's parts by name, else {"": module}
    ({} for no module)."""
    if module is None:
        return {}
    return dict(module.parts) if isinstance(module, Sliced) else {"": module}


def insert_parts(
    parts: Iterable[Part], make: Callable[[Part], SiteModule], reads_site: bool = False
) -> list[Insertion]:
    """One module per part (`make`), inserted at its layer: alone for a whole layer, in a
    `Sliced` container for the parts of a fused one. `reads_site`: the module reads the
    layer's input (LoRA) rather than its output."""
    by_layer: dict[str, list[Part]] = {}
    for part in parts:
        by_layer.setdefault(part.module, []).append(part)
    insertions = []
    for layer, found in by_layer.items():
        if len(found) == 1 and found[0].rows is None:
            module = make(found[0])
        else:
            module = Sliced({part.name: make(part) for part in found})
        insertions.append(Insertion(layer, module, reads=layer if reads_site else None))
    return insertions
