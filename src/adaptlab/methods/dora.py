"""DoRA's output as one autograd function, which keeps one activation for the backward pass.

Liu et al. 2024 ("DoRA: Weight-Decomposed Low-Rank Adaptation"), eq. 5 with the norm treated as
a constant (§4.3): with f = m / ||W + s B A|| per output, the adapted layer's output is

    y = h + (f - 1) ⊙ base + f ⊙ s u

where h is the layer's output as it stands, base = W x' (no bias; x' = x when the LoRA input is
not dropped), and u = B A x'. Left to autograd, the two products keep both base and u for the
gradient of f; here y = h + (f ⊙ z - base) with z = base + s u, and only z is kept:

    dL/dh = g,   dL/dbase = (f - 1) ⊙ g,   dL/du = s f ⊙ g,   dL/dm = Σ (g ⊙ z) / ||W + s B A||

(sums over every dimension but the last).
"""

from __future__ import annotations

from typing import Any

import torch


class DoRAOutput(torch.autograd.Function):
    """`DoRAOutput.apply(h, base, u, magnitude, norms, scaling)`: DoRA's y (see the module)."""

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: Any,
        h: torch.Tensor,
        base: torch.Tensor,
        update: torch.Tensor,
        magnitude: torch.Tensor,
        norms: torch.Tensor,
        scaling: float,
    ) -> torch.Tensor:
        factor = (magnitude / norms).to(h.dtype)
        z = torch.add(base, update, alpha=scaling)
        ctx.save_for_backward(z, factor, norms)
        ctx.scaling = scaling
        ctx.magnitude_dtype = magnitude.dtype
        return (z * factor).sub_(base).add_(h)  # h + (f ⊙ z - base): exactly h when f = 1, u = 0

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:  # type: ignore[override]
        z, factor, norms = ctx.saved_tensors
        grad_h, grad_base, grad_update, grad_magnitude = ctx.needs_input_grad[:4]
        return (
            grad if grad_h else None,
            grad * (factor - 1) if grad_base else None,
            grad * (factor * ctx.scaling) if grad_update else None,
            (grad * z).flatten(0, -2).sum(0).to(ctx.magnitude_dtype) / norms
            if grad_magnitude
            else None,
            None,
            None,
        )
