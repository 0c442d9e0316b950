"""What one site runs for the active composition: a small tree of steps built once per change.

`AdapterState` builds, for every site, the step that the active composition asks for (or
none: the site then passes its output through untouched) and its forward hook calls
`step.run(output, inputs)`. `inputs` holds the tensors the site's modules read besides the
output: the site's own input (LoRA) or another module's input captured by a pre-hook (a
parallel adapter reads the FFN's input).
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
    """One adapter's modules at the site: h + delta(x) for each (merged ones skipped)."""

    modules: tuple[tuple[SiteModule, str | None], ...]  # (module, the module whose input it reads)

    def run(self, h: torch.Tensor, inputs: Inputs) -> torch.Tensor:
        for module, source in self.modules:
            if not module.merged:
                h = h + module.delta(h if source is None else inputs[source])
        return h

    def reads(self) -> Iterator[str]:
        return (source for _, source in self.modules if source is not None)


@dataclass(frozen=True)
class StackStep(Step):
    """Children in order, each on the output of the one before."""

    children: tuple[Step, ...]

    def run(self, h: torch.Tensor, inputs: Inputs) -> torch.Tensor:
        for child in self.children:
            h = child.run(h, inputs)
        return h

    def reads(self) -> Iterator[str]:
        return (source for child in self.children for source in child.reads())


@dataclass(frozen=True)
class FuseStep(Step):
    """Every child from the same h (a child with nothing here gives h), mixed by the layer."""

    children: tuple[Step | None, ...]
    layer: nn.Module

    def run(self, h: torch.Tensor, inputs: Inputs) -> torch.Tensor:
        outputs = [h if child is None else child.run(h, inputs) for child in self.children]
        return self.layer(h, torch.stack(outputs))  # type: ignore[no-any-return]

    def reads(self) -> Iterator[str]:
        return (source for child in self.children if child for source in child.reads())


@dataclass(frozen=True)
class ParallelStep(Step):
    """The batch holds one copy per branch, in order: branch i runs on slice i."""

    children: tuple[Step | None, ...]

    def run(self, h: torch.Tensor, inputs: Inputs) -> torch.Tensor:
        count = len(self.children)
        slices = h.chunk(count)
        sliced_inputs = {name: x.chunk(count) for name, x in inputs.items()}
        outputs = [
            part if child is None else child.run(part, {n: x[i] for n, x in sliced_inputs.items()})
            for i, (child, part) in enumerate(zip(self.children, slices, strict=True))
        ]
        return torch.cat(outputs)

    def reads(self) -> Iterator[str]:
        return (source for child in self.children if child for source in child.reads())
