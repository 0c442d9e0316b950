"""`Parallel("a", "b")`: the batch is copied once per branch and branch i runs adapter i on
copy i, each with its own head; outputs come back stacked along the batch dimension. A Parallel
holds adapter names and Stacks and is only ever the outermost block. Its adapters must each
act by a change at their sites alone, and the branches' heads must have the same shapes."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.func import functional_call
from torch.utils.hooks import RemovableHandle

from adaptlab.backbone.parts import get_module
from adaptlab.errors import ConfigError
from adaptlab.methods.blocks.base import BLOCKS, Adapters, Block
from adaptlab.methods.blocks.stack import Stack
from adaptlab.methods.dispatch import Inputs, Step
from adaptlab.methods.handle import AdaptHandle


@BLOCKS.register
class Parallel(Block):
    """One copy of the batch per branch (names and Stacks); the outermost block only."""

    name = "parallel"
    holds = (Stack,)
    outermost = True
    children: tuple[str | Stack, ...]

    def check(self, adapters: Adapters) -> None:
        super().check(adapters)
        for name in self.adapter_names():
            adapters.require_separable(name, "Parallel")
        shapes = {
            tuple(tuple(p.shape) for p in adapters.head_tensors(branch).values())
            for branch in self.children
        }
        if len(shapes) > 1:
            raise ConfigError(
                f"{self}: the branches' heads have different shapes; Parallel needs "
                "heads of the same number of labels"
            )

    def step(self, site: str, adapters: Adapters) -> Step | None:
        children = tuple(adapters.step(child, site) for child in self.children)
        if all(child is None for child in children):
            return None
        return ParallelStep(children)

    def head_owner(self, adapters: Adapters) -> AdaptHandle | None:
        return adapters.head_owner(self.children[0])

    def hooks(self, adapters: Adapters) -> list[RemovableHandle]:
        """A pre-hook on the model that copies the batch once per branch, and a hook on each
        head module that runs each branch's head on its slice."""
        model = adapters.model
        hooks = [model.register_forward_pre_hook(_copy_batch(len(self.children)), with_kwargs=True)]
        heads = [adapters.head_tensors(branch) for branch in self.children]
        for module_name in adapters.head_modules:
            prefix = f"{module_name}."
            local = [
                {n.removeprefix(prefix): t for n, t in head.items() if n.startswith(prefix)}
                for head in heads
            ]
            module = get_module(model, module_name)
            hooks.append(module.register_forward_hook(_per_branch(local)))
        return hooks


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


def _copy_batch(copies: int) -> Any:
    """A pre-hook that repeats every batch-sized tensor argument `copies` times along dim 0."""

    def hook(module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        tensors = [v for v in (*args, *kwargs.values()) if isinstance(v, torch.Tensor)]
        if not tensors:
            return None
        batch = tensors[0].shape[0] if tensors[0].dim() else None

        def copy(value: Any) -> Any:
            if isinstance(value, torch.Tensor) and value.dim() and value.shape[0] == batch:
                return value.repeat(copies, *([1] * (value.dim() - 1)))
            return value

        return tuple(copy(a) for a in args), {k: copy(v) for k, v in kwargs.items()}

    return hook


def _per_branch(heads: list[dict[str, nn.Parameter]]) -> Any:
    """A hook that runs the head module once per branch slice, with that branch's tensors."""

    running = False

    def hook(module: nn.Module, args: tuple[Any, ...], output: Any) -> Any:
        nonlocal running
        if running:  # the per-branch calls below come through this hook too
            return None
        count = len(heads)
        sliced = [a.chunk(count) if isinstance(a, torch.Tensor) else None for a in args]
        outputs = []
        running = True
        try:
            for i, tensors in enumerate(heads):
                branch = tuple(
                    s[i] if s is not None else a for s, a in zip(sliced, args, strict=True)
                )
                moved = {
                    n: t.to(device=output.device, dtype=output.dtype) for n, t in tensors.items()
                }
                outputs.append(functional_call(module, moved, branch))
        finally:
            running = False
        return torch.cat(outputs)

    return hook
