"""The reference model of preference tuning, from the policy's own object: no second copy of the
model is kept. Training one adapter, the reference is the base with every adapter off (as TRL's
`DPOTrainer` disables a PEFT adapter); training an adapter stacked on frozen ones (`--stack
runs/sft`: DPO on top of an SFT adapter), it is the frozen ones alone, the trained one taken off
the top of the Stack."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from torch import nn

from adaptlab.methods.adapt import active, disabled, set_active
from adaptlab.methods.blocks import Stack
from adaptlab.methods.blocks.base import Composition


def reference_composition(running: Composition | None) -> Composition | None:
    """What runs as the reference while `running` trains: the Stack's adapters under its top
    one, else nothing (the base)."""
    if isinstance(running, Stack) and len(running.children) > 1:
        under = running.children[:-1]
        return under[0] if len(under) == 1 else Stack(*under)
    return None


@contextmanager
def reference_model(model: nn.Module) -> Iterator[nn.Module]:
    """Inside the block `model` is the reference (see the module docstring); on exit the policy
    runs again."""
    running = active(model)
    under = reference_composition(running)
    if under is None:
        with disabled(model) as base:
            yield base
        return
    set_active(model, under)
    try:
        yield model
    finally:
        set_active(model, running)
