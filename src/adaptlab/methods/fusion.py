"""AdapterFusion (Pfeiffer et al. 2021; slides-adapters, "AdapterFusion Method"): attention
over the outputs of frozen adapters, one fusion layer per site they act at.

At a site with output h (the sub-layer output: the query), each adapter n changes h by
delta_n (its output is z_n = h + delta_n), and the fusion gives

    s_n = softmax_n( (Q h) . (K delta_n) / T ),     o = h + V sum_n s_n delta_n,

the residual h passing outside the value matrix as in the authors' implementation (the
`adapters` library's dynamic fusion). Keying on z_n instead of delta_n gives the same weights:
the h part of (Q h) . (K z_n) is the same for every adapter and cancels in the softmax, as does
any bias of K. Two exact rewrites make the layer cheaper than the literal form: K is applied
once, to the query (K^T Q h), instead of N times to the adapters; and V, linear without bias,
runs once, on the mixture. V starts as the identity, so one adapter under a fusion is exactly
that adapter; Q and K start from N(0, init_std^2). `value_regularization` adds
lambda * sum ||V - I||^2 over the layers to the training loss (the paper's regulariser, on at
lambda = 0.01 as in the authors' dynamic fusion; 0 turns it off). Its options are
`adaptlab.methods.configs.fusion`.
"""

from __future__ import annotations

import torch
from torch import nn

from adaptlab.methods.configs.fusion import FusionConfig


class FusionLayer(nn.Module):
    """The fusion at one site: query and key projections, and the value matrix (no biases
    where they would cancel or break the identity start)."""

    def __init__(self, hidden_size: int, config: FusionConfig, generator: torch.Generator) -> None:
        super().__init__()
        self.query = nn.Linear(hidden_size, hidden_size)
        self.key = nn.Linear(hidden_size, hidden_size, bias=False)
        self.value = nn.Linear(hidden_size, hidden_size, bias=False)
        with torch.no_grad():
            self.query.weight.normal_(0.0, config.init_std, generator=generator)
            self.query.bias.zero_()
            self.key.weight.normal_(0.0, config.init_std, generator=generator)
            self.value.weight.copy_(torch.eye(hidden_size))
        self.temperature = config.temperature
        self.value_regularization = config.value_regularization
        self.last_weights: torch.Tensor | None = None
        """Attention over the adapters at the last forward, (..., N), detached."""

    def forward(self, h: torch.Tensor, outputs: torch.Tensor) -> torch.Tensor:
        """`h`: (..., d) the site's output; `outputs`: (N, ..., d) the adapters' outputs."""
        deltas = outputs - h
        probe = self.query(h) @ self.key.weight  # K^T (Q h + b_Q), (..., d)
        scores = torch.einsum("...d,n...d->...n", probe, deltas) / self.temperature
        weights = scores.softmax(dim=-1)
        self.last_weights = weights.detach()
        mixed = torch.einsum("...n,n...d->...d", weights, deltas)
        return h + self.value(mixed)  # type: ignore[no-any-return]

    def regularization(self) -> torch.Tensor | None:
        """lambda * ||V - I||^2, or None when the regulariser is off."""
        if self.value_regularization == 0:
            return None
        eye = torch.eye(self.value.weight.shape[0], device=self.value.weight.device)
        return self.value_regularization * (self.value.weight - eye).pow(2).sum()
