"""Mixed-precision steps (Micikevicius et al. 2018, "Mixed Precision Training", §3): the
forward pass and the loss under autocast in bf16 or fp16, float32 master copies of every
trained tensor and of the optimizer's state, and for fp16 dynamic loss scaling — the loss is
multiplied by a scale before the backward pass so small gradients do not flush to zero, the
gradients are divided by it before clipping, a step whose gradients overflowed is skipped and
the scale halved, and the scale doubles again after a run of good steps (§3.2).

`autocast_at` is the one context every forward pass of a run enters at its precision: the
loop's training and dev passes, and whoever runs the model outside the loop (a run's test and
analyses, a sequence's tests and its strategies' passes over the model)."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext

import torch
from torch import nn

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def autocast_at(precision: str, device: torch.device) -> AbstractContextManager[object]:
    """The context a forward pass (and its loss) at `precision` on `device` runs in: autocast
    to bf16 or fp16, nothing at fp32. No cast of a weight outlives the pass that made it, so
    weights changed inside the context (an analysis moving them) are read afresh."""
    if precision == "fp32":
        return nullcontext()
    return torch.autocast(device.type, dtype=DTYPES[precision], cache_enabled=False)


class Precision:
    """How the loop computes at `precision` ("fp32", "bf16" or "fp16") on `device`."""

    def __init__(self, precision: str, device: torch.device) -> None:
        self.name = precision
        self.device = device
        self.scaler = torch.amp.GradScaler(device.type, enabled=precision == "fp16")
        self.skipped = 0
        """Steps skipped because fp16 gradients overflowed."""

    def autocast(self) -> AbstractContextManager[object]:
        """The context a forward pass (and its loss) runs in (`autocast_at`)."""
        return autocast_at(self.name, self.device)

    def step(
        self,
        loss: torch.Tensor,
        optimizer: torch.optim.Optimizer,
        parameters: Sequence[nn.Parameter],
        max_grad_norm: float,
    ) -> bool:
        """Back-propagate `loss`, clip the gradients' norm at `max_grad_norm`, step the
        optimizer and free the gradients; False when fp16 gradients overflowed and the step
        was skipped."""
        optimizer.zero_grad(set_to_none=True)
        self.scaler.scale(loss).backward()
        self.scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(parameters, max_grad_norm)
        before = self.scaler.get_scale() if self.scaler.is_enabled() else 1.0
        self.scaler.step(optimizer)  # an optimizer step, skipped when fp16 gradients overflowed
        self.scaler.update()
        optimizer.zero_grad(set_to_none=True)  # no gradient held through the next forward pass
        stepped = not self.scaler.is_enabled() or self.scaler.get_scale() >= before
        self.skipped += not stepped
        return stepped


def keep_trained_in_float32(model: nn.Module) -> list[tuple[str, nn.Parameter]]:
    """Make every trainable parameter of `model` float32 (master copies beside a half-precision
    base) and return them by name."""
    trainable = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    for _, parameter in trainable:
        if parameter.dtype != torch.float32:
            parameter.data = parameter.data.float()
    return trainable
