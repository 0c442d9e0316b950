"""Language-model losses without the full logits: `hidden @ weight.T + bias` is computed a chunk
of positions at a time inside custom autograd functions, so neither the (positions,
vocabulary) logits nor their gradient ever exist whole; only one chunk's do (the idea of the
fused linear cross-entropy of Liger Kernel, Hsu et al. 2024, and of Cut Cross-Entropy,
Wijmans et al. 2025, "Cut Your Losses in Large-Vocabulary Language Models"; written here in
plain PyTorch, without their kernels).

A chunk holds `chunk_size` positions, by default as many as keep its logits within
`LOGITS_PER_CHUNK` floats. The head's matrix product runs in the dtype the head would use (the
autocast dtype under autocast, else the hidden states'), the softmax in float32, as the plain
`F.cross_entropy(logits.float(), ...)` does; gradients are summed across chunks in float32.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from adaptlab.data.encoding import IGNORE_INDEX
from adaptlab.engine.lm_head_capture import LmHeadInput, lm_head_input
from adaptlab.errors import ConfigError

LOGITS_PER_CHUNK = 1 << 23
"""Logits a chunk holds at most by default (8 Mi floats, 32 MiB in float32): 170 positions of
a 49,152-word vocabulary, 262 of a 32,000-word one, 33 of XLM-R's 250,002. Enough rows to keep
the head's matrix product efficient, few enough that a chunk's logits, their float32 softmax
and gradient stay well below what the checkpointed layers hold."""

Grads = tuple[torch.Tensor | None, torch.Tensor | None, torch.Tensor | None]


@dataclass(frozen=True)
class TokenLoss:
    """Cross-entropy summed over the predicted tokens (differentiable), how many of them the
    most likely word got right, and how many there are (0-d tensors)."""

    total: torch.Tensor
    correct: torch.Tensor
    count: torch.Tensor

    def mean(self) -> torch.Tensor:
        """Mean cross-entropy per predicted token (NaN when there is none, as F.cross_entropy)."""
        return self.total / self.count


def chunk_rows(vocabulary: int, chunk_size: int | None = None) -> int:
    """Positions per chunk: `chunk_size` when given, else as many as keep a chunk's logits
    within `LOGITS_PER_CHUNK`."""
    if chunk_size is None:
        return max(1, LOGITS_PER_CHUNK // vocabulary)
    if chunk_size < 1:
        raise ConfigError(f"chunk_size must be >= 1 position, got {chunk_size}")
    return chunk_size


def linear_cross_entropy(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    targets: torch.Tensor,
    *,
    chunk_size: int | None = None,
) -> TokenLoss:
    """Cross-entropy of `hidden` (positions, hidden) @ `weight.T` (+ `bias`) against `targets`
    (positions; IGNORE_INDEX positions count for nothing), chunk by chunk."""
    needs = _needs_grad(hidden, weight, bias)
    rows = chunk_rows(weight.shape[0], chunk_size)
    total, correct = _LinearCrossEntropy.apply(hidden, weight, bias, targets, rows, needs)
    return TokenLoss(total, correct, targets.ne(IGNORE_INDEX).sum())


def linear_log_probs_at(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    ids: torch.Tensor,
    *,
    temperature: float = 1.0,
    chunk_size: int | None = None,
) -> torch.Tensor:
    """log softmax((hidden @ weight.T + bias) / temperature) at the word ids `ids`
    (positions, k): (positions, k) float32, differentiable, chunk by chunk."""
    rows = chunk_rows(weight.shape[0], chunk_size)
    out: torch.Tensor = _LinearLogProbsAt.apply(hidden, weight, bias, ids, temperature, rows)
    return out


@torch.no_grad()
def linear_top_k(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    k: int,
    *,
    temperature: float = 1.0,
    chunk_size: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The `k` most likely word ids at each position and their log-probabilities at
    `temperature`, (positions, k) each, chunk by chunk (no gradient)."""
    with _head_dtype(hidden) as dtype:
        h, w, b = _cast(hidden, weight, bias, dtype)
        ids = torch.empty((h.shape[0], k), dtype=torch.long, device=h.device)
        values = torch.empty((h.shape[0], k), dtype=torch.float32, device=h.device)
        for part in _chunks(h.shape[0], chunk_rows(w.shape[0], chunk_size)):
            scaled = F.linear(h[part], w, b).float() / temperature
            top = scaled.topk(k, dim=-1)
            ids[part] = top.indices
            values[part] = top.values - torch.logsumexp(scaled, -1, keepdim=True)
    return ids, values


def next_token_loss(
    head: LmHeadInput, labels: torch.Tensor, *, chunk_size: int | None = None
) -> TokenLoss:
    """Cross-entropy of each position against the next token of `labels` (batch, length);
    positions whose next label is IGNORE_INDEX (pads) are left out before the head runs."""
    if head.hidden.shape[:2] != labels.shape:
        raise ConfigError(
            f"the LM head read hidden states of shape {tuple(head.hidden.shape[:2])}, "
            f"not the labels' {tuple(labels.shape)}"
        )
    targets = labels[:, 1:]
    kept = targets.ne(IGNORE_INDEX)
    hidden = head.hidden[:, :-1][kept]
    return linear_cross_entropy(
        hidden, head.weight, head.bias, targets[kept], chunk_size=chunk_size
    )


def causal_lm_loss(
    model: nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor | None,
    labels: torch.Tensor | None = None,
) -> torch.Tensor:
    """Mean next-token cross-entropy of a causal LM, without its full logits; `labels` default
    to `input_ids` with the positions the attention mask leaves out ignored (no mask: none)."""
    if labels is None:
        labels = input_ids
        if attention_mask is not None:
            labels = input_ids.masked_fill(attention_mask == 0, IGNORE_INDEX)
    head = lm_head_input(model, input_ids=input_ids, attention_mask=attention_mask)
    return next_token_loss(head, labels).mean()


class _LinearCrossEntropy(torch.autograd.Function):
    """Summed cross-entropy and its gradients in one pass (Liger's choice over Cut
    Cross-Entropy's recomputation): the loss is a scalar, so the gradient of the sum is known in
    the forward up to the scale the backward brings, and each chunk's logits are made once
    instead of twice. What waits for the backward is as large as the inputs, not the logits
    (hidden's gradient, and weight's when it trains), in float32 so that an fp16 loss scale,
    applied in the backward, cannot push it out of range."""

    @staticmethod
    def forward(
        ctx: Any,
        hidden: torch.Tensor,
        weight: torch.Tensor,
        bias: torch.Tensor | None,
        targets: torch.Tensor,
        rows: int,
        needs: tuple[bool, bool, bool],
    ) -> tuple[torch.Tensor, torch.Tensor]:
        total = torch.zeros((), dtype=torch.float32, device=hidden.device)
        correct = torch.zeros((), dtype=torch.long, device=hidden.device)
        grads = _zeros(hidden, weight, bias, needs)
        with _head_dtype(hidden) as dtype:
            h, w, b = _cast(hidden, weight, bias, dtype)
            for part in _chunks(h.shape[0], rows):
                logits = F.linear(h[part], w, b).float()
                wanted = targets[part]
                valid = wanted.ne(IGNORE_INDEX)
                safe = wanted.masked_fill(~valid, 0).unsqueeze(1)
                log_norm = torch.logsumexp(logits, -1, keepdim=True)
                losses = log_norm - logits.gather(1, safe)
                total += losses.squeeze(1).masked_fill(~valid, 0).sum()
                correct += (logits.argmax(-1).eq(wanted) & valid).sum()
                if any(needs):
                    # d(sum of losses)/d(logits) = softmax - one-hot, zero at ignored positions
                    grad = logits.sub_(log_norm).exp_()
                    grad.scatter_add_(1, safe, torch.full_like(losses, -1.0))
                    grad.mul_(valid.unsqueeze(1))
                    _accumulate(grads, part, grad, h, w)
        ctx.save_for_backward(*grads)
        ctx.dtypes = _dtypes(hidden, weight, bias)
        ctx.mark_non_differentiable(correct)
        return total, correct

    @staticmethod
    def backward(ctx: Any, grad_total: torch.Tensor, grad_correct: Any) -> tuple[Any, ...]:
        scaled = tuple(
            None if g is None else (g * grad_total).to(dtype)
            for g, dtype in zip(ctx.saved_tensors, ctx.dtypes, strict=True)
        )
        return (*scaled, None, None, None)


class _LinearLogProbsAt(torch.autograd.Function):
    """Log-probabilities at chosen ids, their gradient recomputed chunk by chunk in the
    backward (Cut Cross-Entropy's choice): the output is (positions, k), so its gradient is
    only known in the backward. Saved: the inputs and each position's log-normaliser."""

    @staticmethod
    def forward(
        ctx: Any,
        hidden: torch.Tensor,
        weight: torch.Tensor,
        bias: torch.Tensor | None,
        ids: torch.Tensor,
        temperature: float,
        rows: int,
    ) -> torch.Tensor:
        ids = ids.long()
        out = torch.empty(ids.shape, dtype=torch.float32, device=hidden.device)
        log_norm = torch.empty((hidden.shape[0], 1), dtype=torch.float32, device=hidden.device)
        with _head_dtype(hidden) as dtype:
            h, w, b = _cast(hidden, weight, bias, dtype)
            for part in _chunks(h.shape[0], rows):
                scaled = F.linear(h[part], w, b).float() / temperature
                log_norm[part] = torch.logsumexp(scaled, -1, keepdim=True)
                out[part] = scaled.gather(1, ids[part]) - log_norm[part]
        ctx.save_for_backward(hidden, weight, bias, ids, log_norm)
        ctx.temperature, ctx.rows, ctx.dtype = temperature, rows, dtype
        return out

    @staticmethod
    def backward(ctx: Any, grad_out: torch.Tensor) -> tuple[Any, ...]:
        hidden, weight, bias, ids, log_norm = ctx.saved_tensors
        grads = _zeros(hidden, weight, bias, tuple(ctx.needs_input_grad[:3]))
        temperature = ctx.temperature
        with _head_dtype(hidden):
            h, w, b = _cast(hidden, weight, bias, ctx.dtype)
            for part in _chunks(h.shape[0], ctx.rows):
                scaled = F.linear(h[part], w, b).float() / temperature
                upstream = grad_out[part].float()
                # d(z_i - logsumexp z)/dz_j = [j = i] - softmax(z)_j, for z the scaled logits
                grad = scaled.sub_(log_norm[part]).exp_().mul_(-upstream.sum(-1, keepdim=True))
                grad.scatter_add_(1, ids[part], upstream)
                _accumulate(grads, part, grad.div_(temperature), h, w)
        dtypes = _dtypes(hidden, weight, bias)
        cast = (None if g is None else g.to(t) for g, t in zip(grads, dtypes, strict=True))
        return (*cast, None, None, None)


def _needs_grad(*tensors: torch.Tensor | None) -> tuple[bool, bool, bool]:
    grad = torch.is_grad_enabled()
    a, b, c = (grad and t is not None and t.requires_grad for t in tensors)
    return a, b, c


def _chunks(count: int, rows: int) -> Iterator[slice]:
    for start in range(0, count, rows):
        yield slice(start, min(start + rows, count))


@contextmanager
def _head_dtype(hidden: torch.Tensor) -> Iterator[torch.dtype]:
    """Autocast off inside, yielding the dtype autocast would have given the head's matrix
    product: the same casts then hold in the forward and in the backward (no autocast there)."""
    kind = hidden.device.type
    if not torch.is_autocast_enabled(kind):
        yield hidden.dtype
        return
    dtype = torch.get_autocast_dtype(kind)
    with torch.autocast(kind, enabled=False):
        yield dtype


def _cast(
    hidden: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, dtype: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    return hidden.to(dtype), weight.to(dtype), None if bias is None else bias.to(dtype)


def _dtypes(*tensors: torch.Tensor | None) -> tuple[torch.dtype | None, ...]:
    return tuple(None if t is None else t.dtype for t in tensors)


def _zeros(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    needs: tuple[bool, ...],
) -> Grads:
    """Float32 accumulators for the gradients that are needed."""
    tensors = (hidden, weight, bias)
    return tuple(  # type: ignore[return-value]
        torch.zeros(t.shape, dtype=torch.float32, device=t.device) if t is not None and n else None
        for t, n in zip(tensors, needs, strict=True)
    )


def _accumulate(
    grads: Grads, part: slice, grad: torch.Tensor, h: torch.Tensor, w: torch.Tensor
) -> None:
    """Add a chunk's share: `grad` (chunk, vocabulary) the float32 gradient of its logits,
    `h` and `w` the hidden states and weight in the head's dtype."""
    grad_hidden, grad_weight, grad_bias = grads
    low = grad.to(w.dtype)
    if grad_hidden is not None:
        grad_hidden[part] = low @ w
    if grad_weight is not None:
        grad_weight += (low.T @ h[part]).float()
    if grad_bias is not None:
        grad_bias += grad.sum(0)
