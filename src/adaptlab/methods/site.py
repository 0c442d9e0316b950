"""What a method inserts: a module that returns the change (delta) it makes at one site.

A site is a module of the base model (a linear layer, a sub-layer's output projection). Every
inserted module only computes its delta; one dispatcher per site (`adaptlab.methods.dispatch`)
adds the deltas of the active adapters in the order the active composition asks for, so
stacking, fusing, running in parallel and switching off are the dispatcher's business, not
each method's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch
from torch import nn


class SiteModule(nn.Module):
    """An inserted module: `delta(x)` is what it adds to its site's output.

    `x` is what the module reads (see `Insertion.reads`). A mergeable module can fold its delta
    into the site's weights (`merge_into`) and take it out again (`unmerge_from`); while merged,
    the dispatcher skips it.
    """

    mergeable: ClassVar[bool] = False

    def __init__(self) -> None:
        super().__init__()
        self.merged = False

    def delta(self, x: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def merge_into(self, layer: nn.Module) -> None:
        raise NotImplementedError(f"{type(self).__name__} cannot be merged")

    def unmerge_from(self, layer: nn.Module) -> None:
        raise NotImplementedError(f"{type(self).__name__} cannot be merged")


@dataclass(frozen=True)
class Insertion:
    """One inserted module and where it acts.

    `site`: the module whose output the delta is added to. `reads`: the module whose *input*
    `delta` reads (the site itself for LoRA, the FFN's input projection for a parallel
    adapter), or None to read the site's output as it stands when the module runs (a
    sequential bottleneck adapter, which therefore sees the adapters stacked below it).
    """

    site: str
    module: SiteModule
    reads: str | None = None
