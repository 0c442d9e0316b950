"""Preference-tuning losses as pure functions of log-probabilities and rewards, equal (within
float rounding) to what TRL 1.16's trainers compute (tests/test_preference_trl.py): DPO and its
IPO and hinge variants, SimPO, ORPO, KTO, the Bradley-Terry reward-model loss and GRPO.

Log-probabilities are per sequence: the sum over a completion's tokens of log p(token | what
precedes it), with the number of tokens beside it (`adaptlab.engine.completion_logps`). The
pair losses return one value per pair; the training loss is their mean, as in TRL.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F

from adaptlab.errors import ConfigError

DPO_LOSSES = ("sigmoid", "ipo", "hinge")
GRPO_LOSSES = ("dapo", "grpo")
REWARD_SCALES = ("group", "batch", "none")

GrpoLoss = Literal["dapo", "grpo"]
RewardScale = Literal["group", "batch", "none"]


@dataclass(frozen=True)
class PairLogps:
    """Summed completion log-probabilities of the chosen and rejected completions, and their
    completion token counts, (batch,) each."""

    chosen: torch.Tensor
    rejected: torch.Tensor
    chosen_tokens: torch.Tensor
    rejected_tokens: torch.Tensor

    @classmethod
    def stacked(cls, sums: torch.Tensor, tokens: torch.Tensor) -> PairLogps:
        """From rows laid out as TRL's preference batches are: every chosen completion, then
        every rejected one, in the same order."""
        if sums.shape[0] % 2:
            raise ConfigError(f"a batch of pairs needs an even number of rows, got {sums.shape[0]}")
        chosen, rejected = sums.chunk(2)
        chosen_tokens, rejected_tokens = tokens.chunk(2)
        return cls(chosen, rejected, chosen_tokens, rejected_tokens)

    def chosen_means(self) -> torch.Tensor:
        """Mean log-probability per chosen completion token (one token at least)."""
        return self.chosen / self.chosen_tokens.clamp(min=1)

    def rejected_means(self) -> torch.Tensor:
        """Mean log-probability per rejected completion token (one token at least)."""
        return self.rejected / self.rejected_tokens.clamp(min=1)


@dataclass(frozen=True)
class PairRewards:
    """The implicit rewards TRL logs as rewards/chosen and rewards/rejected, (batch,) each."""

    chosen: torch.Tensor
    rejected: torch.Tensor

    def margins(self) -> torch.Tensor:
        """rewards/margins: chosen minus rejected."""
        return self.chosen - self.rejected

    def accuracies(self) -> torch.Tensor:
        """rewards/accuracies: 1.0 where the chosen reward is the higher."""
        return (self.chosen > self.rejected).float()


def dpo_loss(kind: str, beta: float, policy: PairLogps, reference: PairLogps) -> torch.Tensor:
    """Per-pair DPO loss (Rafailov et al. 2023, Eq. 7; TRL's DPOTrainer `loss_type`):
    "sigmoid" -log sigmoid(beta * margin), margin the chosen minus the rejected log-ratio to
    the reference; "hinge" max(0, 1 - beta * margin) (SLiC, Zhao et al. 2023, Eq. 4 with
    beta = 1 / delta); "ipo" (margin per token - 1 / (2 beta))^2 (Azar et al. 2023, Eq. 17,
    beta their tau), each log-ratio divided by its completion length as TRL does."""
    _check_kind("DPO loss", kind, DPO_LOSSES)
    _check_beta(beta)
    chosen_ratio = policy.chosen - reference.chosen
    rejected_ratio = policy.rejected - reference.rejected
    if kind == "ipo":
        margin = chosen_ratio / policy.chosen_tokens.clamp(min=1) - rejected_ratio / (
            policy.rejected_tokens.clamp(min=1)
        )
        return (margin - 1 / (2 * beta)) ** 2
    margin = chosen_ratio - rejected_ratio
    if kind == "hinge":
        return torch.relu(1 - beta * margin)
    return -F.logsigmoid(beta * margin)


def pair_rewards(beta: float, policy: PairLogps, reference: PairLogps | None = None) -> PairRewards:
    """Detached rewards: beta * (policy - reference) log-probabilities (DPO's implicit reward);
    without a reference, beta * the policy's mean log-probability per token (what TRL's
    CPO / SimPO and ORPO trainers log)."""
    _check_beta(beta)
    if reference is None:
        chosen, rejected = policy.chosen_means(), policy.rejected_means()
    else:
        chosen = policy.chosen - reference.chosen
        rejected = policy.rejected - reference.rejected
    return PairRewards(beta * chosen.detach(), beta * rejected.detach())


def simpo_loss(policy: PairLogps, beta: float, gamma_beta_ratio: float) -> torch.Tensor:
    """Per-pair SimPO loss (Meng et al. 2024, Eq. 6): -log sigmoid(beta * (mean chosen -
    mean rejected log-probability per token) - gamma), gamma = gamma_beta_ratio * beta (TRL's
    CPOTrainer, loss_type="simpo", simpo_gamma = gamma, cpo_alpha = 0)."""
    _check_beta(beta)
    if not math.isfinite(gamma_beta_ratio):
        raise ConfigError(f"SimPO gamma_beta_ratio must be a finite number, got {gamma_beta_ratio}")
    margin = policy.chosen_means() - policy.rejected_means() - gamma_beta_ratio
    return -F.logsigmoid(beta * margin)


def orpo_loss(policy: PairLogps, beta: float, chosen_nll: torch.Tensor) -> torch.Tensor:
    """Per-pair ORPO loss (Hong et al. 2024, Eq. 6-7): `chosen_nll` - beta * log sigmoid(log
    odds(chosen) - log odds(rejected)), odds(y) = p / (1 - p) with p the mean per-token
    probability. TRL's ORPOTrainer takes as `chosen_nll` the mean next-token cross-entropy
    over every attended token of the chosen rows, prompt included, pooled over the batch (a
    0-d tensor, broadcast here); its loss is the mean of these values."""
    _check_beta(beta)
    chosen, rejected = policy.chosen_means().float(), policy.rejected_means().float()
    log_odds = (chosen - rejected) - (_log1mexp(chosen) - _log1mexp(rejected))
    return chosen_nll - beta * F.logsigmoid(log_odds)


def kto_kl(policy: torch.Tensor, reference: torch.Tensor) -> torch.Tensor:
    """KTO's reference point z0 (Ethayarajh et al. 2024, Eq. 8), estimated as TRL does: the
    mean policy-minus-reference log-probability of mismatched (prompt, completion) pairs (each
    prompt with the previous example's completion in its batch), detached and floored at 0;
    a 0-d tensor."""
    return (policy - reference).mean().detach().clamp(min=0)


def kto_loss(
    beta: float,
    policy: torch.Tensor,
    reference: torch.Tensor,
    desirable: torch.Tensor,
    kl: torch.Tensor,
    *,
    desirable_weight: float = 1.0,
    undesirable_weight: float = 1.0,
) -> torch.Tensor:
    """Per-example KTO loss (Ethayarajh et al. 2024, Eq. 8; TRL's KTOTrainer, loss_type="kto"):
    with r = beta * (policy - reference) summed log-probabilities and z = beta * `kl`
    (`kto_kl`), desirable_weight * (1 - sigmoid(r - z)) where `desirable` (bool, (batch,)),
    else undesirable_weight * (1 - sigmoid(z - r))."""
    _check_beta(beta)
    for name, weight in (("desirable", desirable_weight), ("undesirable", undesirable_weight)):
        if not (math.isfinite(weight) and weight >= 0):
            raise ConfigError(f"KTO {name}_weight must be a finite number >= 0, got {weight}")
    ratio = policy - reference
    good = desirable_weight * (1 - torch.sigmoid(beta * (ratio - kl)))
    bad = undesirable_weight * (1 - torch.sigmoid(beta * (kl - ratio)))
    return torch.where(desirable.bool(), good, bad)


def reward_loss(
    chosen: torch.Tensor,
    rejected: torch.Tensor,
    margin: torch.Tensor | None = None,
    *,
    center_coefficient: float | None = None,
) -> torch.Tensor:
    """Per-pair Bradley-Terry reward-model loss (Ouyang et al. 2022, Eq. 1; TRL's
    RewardTrainer): -log sigmoid(r_chosen - r_rejected - margin), plus center_coefficient *
    (r_chosen + r_rejected)^2 when given (Eisenstein et al. 2023, Eq. 2)."""
    difference = chosen - rejected
    if margin is not None:
        difference = difference - margin
    loss = -F.logsigmoid(difference)
    if center_coefficient is not None:
        loss = loss + center_coefficient * (chosen + rejected) ** 2
    return loss


def group_advantages(
    rewards: torch.Tensor, group_size: int, scale: RewardScale = "group"
) -> torch.Tensor:
    """GRPO's advantages (Shao et al. 2024, Eq. 3 outcome supervision; TRL's scale_rewards):
    each reward minus the mean of its group (`group_size` consecutive completions of one
    prompt), divided by the group's standard deviation (Bessel-corrected) + 1e-4 for
    "group", the batch's for "batch", not divided for "none"."""
    _check_kind("reward scale", scale, REWARD_SCALES)
    if group_size < 1 or rewards.numel() % group_size:
        raise ConfigError(
            f"GRPO group_size must divide the {rewards.numel()} rewards, got {group_size}"
        )
    groups = rewards.view(-1, group_size)
    advantages = (groups - groups.mean(1, keepdim=True)).view(-1)
    if scale == "none":
        return advantages
    if scale == "group":
        std = groups.std(1, keepdim=True) if group_size > 1 else torch.zeros_like(groups)
        return advantages / (std.expand_as(groups).reshape(-1) + 1e-4)
    std = rewards.std() if rewards.numel() > 1 else torch.zeros((), dtype=rewards.dtype)
    return advantages / (std + 1e-4)


def grpo_loss(
    kind: GrpoLoss,
    logps: torch.Tensor,
    mask: torch.Tensor,
    advantages: torch.Tensor,
    *,
    old_logps: torch.Tensor | None = None,
    reference_logps: torch.Tensor | None = None,
    beta: float = 0.0,
    epsilon: float = 0.2,
    epsilon_high: float | None = None,
) -> torch.Tensor:
    """GRPO's clipped surrogate (Shao et al. 2024, Eq. 3 / 21; TRL's GRPOTrainer), a 0-d tensor.

    `logps`, `old_logps` (the sampling policy's; default `logps` detached, one step per
    generation) and `reference_logps` are per completion token, (batch, tokens) with `mask`
    marking real tokens; `advantages` (batch,). Per token: -min(w A, clip(w, 1 - epsilon,
    1 + epsilon_high) A), w = exp(logps - old_logps), plus beta * w * (exp(q) - q - 1),
    q = reference_logps - logps (the k3 KL estimate, importance-weighted as TRL's default
    use_bias_correction_kl). "dapo" (TRL's default) averages over every token of the batch,
    "grpo" over each sequence's tokens, then over sequences."""
    _check_kind("GRPO loss", kind, GRPO_LOSSES)
    high = epsilon if epsilon_high is None else epsilon_high
    if not (0 <= epsilon < 1 and high >= 0 and math.isfinite(high)):
        raise ConfigError(
            f"GRPO epsilon must be in [0, 1) and epsilon_high >= 0, got {epsilon}, {epsilon_high}"
        )
    if not (math.isfinite(beta) and beta >= 0):
        raise ConfigError(f"GRPO beta must be a finite number >= 0, got {beta}")
    old = logps.detach() if old_logps is None else old_logps
    ratio = torch.exp(logps - old)
    gain = advantages.unsqueeze(1)
    per_token = -torch.min(ratio * gain, torch.clamp(ratio, 1 - epsilon, 1 + high) * gain)
    if beta != 0.0:
        if reference_logps is None:
            raise ConfigError("GRPO with beta > 0 needs the reference model's log-probabilities")
        q = reference_logps - logps
        per_token = per_token + beta * (torch.exp(q) - q - 1) * ratio
    mask = mask.to(per_token.dtype)
    if kind == "grpo":
        return ((per_token * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)).mean()
    return (per_token * mask).sum() / mask.sum().clamp(min=1.0)


def _log1mexp(x: torch.Tensor) -> torch.Tensor:
    """log(1 - exp(x)) for x < 0, branching at -log 2 to avoid cancellation (Maechler 2012)."""
    return torch.where(x < -math.log(2), torch.log1p(-torch.exp(x)), torch.log(-torch.expm1(x)))


def _check_kind(what: str, kind: str, known: tuple[str, ...]) -> None:
    if kind not in known:
        raise ConfigError(f"unknown {what} {kind!r}; choose one of {', '.join(known)}")


def _check_beta(beta: float) -> None:
    if not (math.isfinite(beta) and beta > 0):
        raise ConfigError(f"beta must be a finite number > 0, got {beta}")
