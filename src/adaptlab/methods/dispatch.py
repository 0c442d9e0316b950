"""What one site runs for the active composition: a small tree of steps built once per change.

For every site the active composition asks for a step (or none: the site then passes its
output through untouched); one adapter's modules make an `AdapterStep`, and each composition
block builds its own step over its children's (`adaptlab.methods.blocks`). The site's forward
hook (`adaptlab.methods.hooks`) calls `step.run(output, inputs)`. `inputs` holds the tensors
the site's modules read besides the output: the site's own input (LoRA) or another module's
input captured by a pre-hook (a parallel adapter reads the FFN's input).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import torch
from torch import nn

from adaptlab.methods.site import SiteModule

Inputs = Mapping[str, torch.Tensor]


class Step:
    """A piece of a site's plan: turns the site's output h into h'."""

    def run(self, h: torch.Tensor, inputs: Inputs) -> torch.Tensor:
        raise NotImplementedError

    def reads(self) -> Iterator[str]:
        """Names of the modules whose input this step reads."""
        raise NotImplementedError


@dataclass(frozen=True)
class AdapterStep(Step):
    """One adapter's modules at the site, each on the output of the one before (merged ones
    skipped): h + delta(x) for most, a new output for those that rewrite it (DoRA)."""

    modules: tuple[tuple[SiteModule, str | None], ...]  # (module, the module whose input it reads)
    site: nn.Module

    def run(self, h: torch.Tensor, inputs: Inputs) -> torch.Tensor:
        for module, source in self.modules:
            if not module.merged:
                h = module.output(h, h if source is None else inputs[source], self.site)
        return h

    def reads(self) -> Iterator[str]:
        return (source for _, source in self.modules if source is not None)
