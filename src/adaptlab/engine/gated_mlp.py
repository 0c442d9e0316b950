"""SwiGLU MLPs that keep less for the backward pass.

The Llama family's MLP computes `down(silu(gate(x)) * up(x))` (Shazeer 2020, SwiGLU), and
autograd keeps three intermediate-width tensors of it for the backward pass: SiLU's input
`gate(x)`, and both factors of the product, `silu(gate(x))` and `up(x)`. `silu_mul` keeps
`gate(x)` and `up(x)` and computes the SiLU again in the backward pass (one elementwise op): a
quarter less of what the MLP keeps (the product itself is kept by whatever reads it, the down
projection's LoRA, say). Its forward and backward call the very aten ops autograd would, so
values and gradients are the same, bit for bit.

`keep_less_in_mlps` gives the MLPs of a model of a listed class that forward; the module's own
projections still run as modules, so adapters inserted at them and hooks on them (the
knowledge neurons read `down_proj`'s input) see what they saw before.
"""

from __future__ import annotations

import types
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

GATED_MLPS = ("LlamaMLP", "MistralMLP", "Qwen2MLP", "Qwen3MLP", "Olmo2MLP", "GraniteMLP")
"""transformers' MLP classes whose forward is `down_proj(act_fn(gate_proj(x)) * up_proj(x))`."""
_SILU = ("SiLU", "SiLUActivation")
"""The SiLU modules `act_fn` may be (torch's, transformers')."""


class _SiluMul(torch.autograd.Function):
    """silu(gate) * up, keeping gate and up (not silu(gate)) for the backward pass."""

    @staticmethod
    def forward(ctx: Any, gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(gate, up)
        return F.silu(gate) * up

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        gate, up = ctx.saved_tensors
        grad_gate = grad_up = None
        if ctx.needs_input_grad[0]:
            grad_gate = torch.ops.aten.silu_backward(grad * up, gate)
        if ctx.needs_input_grad[1]:
            grad_up = grad * F.silu(gate)
        return grad_gate, grad_up


def silu_mul(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """`silu(gate) * up`, keeping only `gate` and `up` for the backward pass."""
    out: torch.Tensor = _SiluMul.apply(gate, up)
    return out


def _forward(self: Any, x: torch.Tensor) -> torch.Tensor:
    return self.down_proj(silu_mul(self.gate_proj(x), self.up_proj(x)))


def keep_less_in_mlps(model: nn.Module) -> int:
    """Give every SwiGLU MLP of `model` (of a class in `GATED_MLPS`, with a SiLU `act_fn`) the
    forward that keeps less; how many MLPs now have it."""
    count = 0
    for module in model.modules():
        if type(module).__name__ not in GATED_MLPS:
            continue
        if type(getattr(module, "act_fn", None)).__name__ not in _SILU:
            continue
        module.forward = types.MethodType(_forward, module)
        count += 1
    return count
