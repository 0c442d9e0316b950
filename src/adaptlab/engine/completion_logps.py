"""Log-probabilities of completions under a causal LM, for the preference losses
(`adaptlab.engine.preference_loss`): each row of a batch is a prompt followed by a completion,
`completion_mask` (batch, length) marks the completion tokens (1) as TRL's preference batches
do, and token i is scored by position i - 1's logits. Only the completion positions go through
the LM head, chunk by chunk (`adaptlab.engine.lm_loss.linear_log_probs_at`), so the
(batch, length, vocabulary) logits never exist whole.

A completion token at position 0 has no position before it and is not scored (as in TRL).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from adaptlab.engine.lm_head_capture import LmHeadInput, lm_head_input
from adaptlab.engine.lm_loss import linear_log_probs_at
from adaptlab.errors import ConfigError


@dataclass(frozen=True)
class CompletionLogps:
    """Per row: `sums` the summed log-probability of its completion tokens ((batch,) float32,
    differentiable) and `tokens` how many completion tokens were scored ((batch,) long)."""

    sums: torch.Tensor
    tokens: torch.Tensor


def completion_log_probs(
    model: nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor | None,
    completion_mask: torch.Tensor,
    *,
    temperature: float = 1.0,
    chunk_size: int | None = None,
) -> CompletionLogps:
    """Run `model` on the batch and sum each row's completion log-probabilities."""
    head = lm_head_input(model, input_ids=input_ids, attention_mask=attention_mask)
    return head_completion_log_probs(
        head, input_ids, completion_mask, temperature=temperature, chunk_size=chunk_size
    )


def completion_token_log_probs(
    model: nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor | None,
    completion_mask: torch.Tensor,
    *,
    temperature: float = 1.0,
    chunk_size: int | None = None,
) -> torch.Tensor:
    """Log-probability of each next token, (batch, length - 1) float32: column i holds token
    i + 1's, zero where token i + 1 is not a completion token (GRPO's per-token terms)."""
    head = lm_head_input(model, input_ids=input_ids, attention_mask=attention_mask)
    kept, values = _scored(head, input_ids, completion_mask, temperature, chunk_size)
    return values.new_zeros(kept.shape).masked_scatter(kept, values)


def head_completion_log_probs(
    head: LmHeadInput,
    input_ids: torch.Tensor,
    completion_mask: torch.Tensor,
    *,
    temperature: float = 1.0,
    chunk_size: int | None = None,
) -> CompletionLogps:
    """`completion_log_probs` from hidden states already read (one forward serving several
    terms, as ORPO's likelihood and odds ratio)."""
    kept, values = _scored(head, input_ids, completion_mask, temperature, chunk_size)
    rows = torch.arange(kept.shape[0], device=kept.device).unsqueeze(1).expand_as(kept)[kept]
    sums = values.new_zeros(kept.shape[0]).index_add(0, rows, values)
    return CompletionLogps(sums, kept.sum(1))


def _scored(
    head: LmHeadInput,
    input_ids: torch.Tensor,
    completion_mask: torch.Tensor,
    temperature: float,
    chunk_size: int | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Which next tokens are completion tokens ((batch, length - 1) bool) and their
    log-probabilities (one float32 per kept position, row-major)."""
    if completion_mask.shape != input_ids.shape or head.hidden.shape[:2] != input_ids.shape:
        raise ConfigError(
            f"completion_mask {tuple(completion_mask.shape)}, input_ids "
            f"{tuple(input_ids.shape)} and the LM head's hidden states "
            f"{tuple(head.hidden.shape[:2])} must have the same (batch, length)"
        )
    kept = completion_mask[:, 1:].to(device=head.hidden.device).bool()
    hidden = head.hidden[:, :-1][kept]
    ids = input_ids[:, 1:].to(head.hidden.device)[kept].unsqueeze(1)
    values = linear_log_probs_at(
        hidden, head.weight, head.bias, ids, temperature=temperature, chunk_size=chunk_size
    )
    return kept, values.squeeze(1)
