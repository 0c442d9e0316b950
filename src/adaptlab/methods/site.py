"""What a method inserts: a module that acts at one site of the base model.

A site is a module of the base model (a linear layer, a block, an attention module). Every
inserted module acts on one thing at its site, named by its kind (`acts_on`):

- ``output`` (`SiteModule`): the site's output. Most modules only compute the change (delta)
  they make; one dispatcher per site (`adaptlab.methods.dispatch`) runs the modules of the
  active adapters in the order the composition asks for, so stacking, fusing, running in
  parallel and switching off are the dispatcher's business, not each method's.
- ``input`` (`InputModule`): the site's input, rewritten before the site runs ((IA)3's scaling
  of the FFN's intermediate activation, the input of the FFN output projection).
- ``weight`` (`WeightModule`): the site's weight while the site runs (mixout).
- ``attention`` (`AttentionModule`): the keys and values an attention module attends to
  (prefix tuning prepends learned ones).

What an inserted module saves (`saved_tensors`) may differ from what it trains: prefix tuning
trains a reparameterising MLP and saves the prefixes it produces.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from torch import nn

OUTPUT, INPUT, WEIGHT, ATTENTION = "output", "input", "weight", "attention"


class SiteModule(nn.Module):
    """An inserted module acting on its site's output: `output(h, x, site)`.

    By default the module adds `delta(x)` to the output h; `x` is what it reads (see
    `Insertion.reads`). A module may instead return a new output from h itself (DoRA rescales
    it, Ladder Side-Tuning replaces the last block's). A mergeable module can fold itself into
    the site's weights (`merge_into`) and take itself out again (`unmerge_from`); while merged,
    the dispatcher skips it.
    """

    mergeable: ClassVar[bool] = False
    acts_on: ClassVar[str] = OUTPUT
    changes_output: bool = True
    """False for a module that only reads its site's output (a side network's ladder)."""
    sees_model_call: ClassVar[bool] = False
    """True for a module that reads the model's own call arguments (`model_call`)."""
    fusable: ClassVar[bool] = True
    """Whether Fuse and Parallel may hold it: all it does is a change at its own site."""
    common_start: ClassVar[float | None] = None
    """The value every parameter starts at whatever the seed ((IA)3's scales start at 1), from
    which combining adapters takes TIES and DARE deltas (`adaptlab.methods.combine`); None for
    a seeded random start, from which no two adapters' changes can be compared."""

    def __init__(self) -> None:
        super().__init__()
        self.merged = False

    def delta(self, x: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def output(self, h: torch.Tensor, x: torch.Tensor, site: nn.Module) -> torch.Tensor:
        """The site's output after this module: h (the output so far) + delta(x)."""
        return h + self.delta(x)

    def model_call(self, arguments: Mapping[str, Any]) -> None:
        """See the arguments of the model's forward call, by name, before it runs."""

    def saved_tensors(self) -> dict[str, torch.Tensor]:
        """What `save_adapter` writes for this module, by parameter name once loaded."""
        return {name: p.detach() for name, p in self.named_parameters()}

    def merge_into(self, layer: nn.Module) -> None:
        raise NotImplementedError(f"{type(self).__name__} cannot be merged")

    def unmerge_from(self, layer: nn.Module) -> None:
        raise NotImplementedError(f"{type(self).__name__} cannot be merged")


class InputModule(SiteModule):
    """Rewrites its site's input before the site runs: `rewrite(x)`."""

    acts_on = INPUT
    fusable = False

    def rewrite(self, x: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError


class WeightModule(SiteModule):
    """Replaces one of its site's weights (`parameter`) while the site runs: `replace_weight(w)`
    from the one in place."""

    acts_on = WEIGHT
    fusable = False
    parameter: str = "weight"
    """The site's parameter it replaces (a mixture of experts' `down_proj`, say)."""

    def replace_weight(self, w: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError


class AttentionModule(SiteModule):
    """Gives an attention module extra keys and values to attend to: `keys_values()`."""

    acts_on = ATTENTION
    fusable = False

    def keys_values(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Keys and values, each (l, width of the key projection's output)."""
        raise NotImplementedError


@dataclass(frozen=True)
class Insertion:
    """One inserted module and where it acts.

    `site`: the module the inserted module acts at. `reads` (output modules only): the module
    whose *input* `delta` reads (the site itself for LoRA, the FFN's input projection for a
    parallel adapter), or None to read the site's output as it stands when the module runs (a
    sequential bottleneck adapter, which therefore sees the adapters stacked below it).
    """

    site: str
    module: SiteModule
    reads: str | None = None
