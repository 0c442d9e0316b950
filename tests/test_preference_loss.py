"""Properties of the completion log-probabilities and the preference losses that hold without
TRL: agreement with the full logits, values at known points, and one-line refusals."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from tiny_models import tiny_model

from adaptlab.engine.completion_logps import completion_log_probs, completion_token_log_probs
from adaptlab.engine.preference_loss import (
    PairLogps,
    dpo_loss,
    group_advantages,
    grpo_loss,
    kto_kl,
    kto_loss,
    orpo_loss,
    pair_rewards,
    reward_loss,
    simpo_loss,
)
from adaptlab.errors import ConfigError


def batch() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Three right-padded rows: a prompt, then a completion, then pads."""
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(2, 100, (3, 8), generator=generator)
    attention = torch.tensor([[1] * 8, [1] * 6 + [0] * 2, [1] * 4 + [0] * 4])
    completion = torch.tensor(
        [[0, 0, 0, 1, 1, 1, 1, 1], [0, 0, 1, 1, 1, 1, 0, 0], [0, 0, 0, 1, 0, 0, 0, 0]]
    )
    return ids.masked_fill(attention == 0, 0), attention, completion


def full_logits_reference(model: torch.nn.Module, ids, attention, completion, temperature=1.0):
    logits = model(input_ids=ids, attention_mask=attention).logits[:, :-1].float()
    logps = F.log_softmax(logits / temperature, -1).gather(2, ids[:, 1:].unsqueeze(2)).squeeze(2)
    return logps * completion[:, 1:]


@pytest.mark.parametrize("chunk_size", (None, 2))
def test_completion_log_probs_equal_the_full_logits_and_their_gradient(chunk_size) -> None:
    model = tiny_model("llama", causal=True)
    ids, attention, completion = batch()
    expected = full_logits_reference(model, ids, attention, completion)
    ours = completion_log_probs(model, ids, attention, completion, chunk_size=chunk_size)
    torch.testing.assert_close(ours.sums, expected.sum(1), atol=1e-5, rtol=1e-5)
    assert ours.tokens.tolist() == [5, 4, 1]
    assert ours.sums.dtype == torch.float32

    weights = torch.tensor([1.0, -2.0, 0.5])
    (ours.sums * weights).sum().backward()
    ours_grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    (expected.sum(1) * weights).sum().backward()
    for mine, theirs in zip(ours_grads, (p.grad for p in model.parameters()), strict=True):
        torch.testing.assert_close(mine, theirs, atol=1e-5, rtol=1e-4)


def test_token_log_probs_are_zero_off_the_completion_and_follow_the_temperature() -> None:
    model = tiny_model("llama", causal=True)
    ids, attention, completion = batch()
    with torch.no_grad():
        ours = completion_token_log_probs(model, ids, attention, completion, temperature=0.7)
        expected = full_logits_reference(model, ids, attention, completion, temperature=0.7)
    assert ours.shape == (3, 7)
    assert ours[completion[:, 1:] == 0].eq(0).all()
    torch.testing.assert_close(ours, expected, atol=1e-5, rtol=1e-5)


def test_completion_mask_of_another_shape_is_refused() -> None:
    model = tiny_model("llama", causal=True)
    ids, attention, completion = batch()
    with pytest.raises(ConfigError, match="same"):
        completion_log_probs(model, ids, attention, completion[:, 1:])


def pair(chosen, rejected, chosen_tokens=(2, 2), rejected_tokens=(2, 2)) -> PairLogps:
    return PairLogps(
        torch.tensor(chosen),
        torch.tensor(rejected),
        torch.tensor(chosen_tokens),
        torch.tensor(rejected_tokens),
    )


def test_dpo_losses_at_known_points() -> None:
    policy, reference = pair([-3.0, -5.0], [-4.0, -4.0]), pair([-3.0, -6.0], [-4.0, -3.0])
    same = dpo_loss("sigmoid", 0.1, policy, policy)
    torch.testing.assert_close(same, torch.full((2,), math.log(2)))
    # margins: 0 and (1 - (-1)) = 2
    torch.testing.assert_close(
        dpo_loss("sigmoid", 0.5, policy, reference), -F.logsigmoid(torch.tensor([0.0, 1.0]))
    )
    torch.testing.assert_close(dpo_loss("hinge", 0.5, policy, reference), torch.tensor([1.0, 0]))
    # per token (2 tokens each): 0 and 1; minus 1 / (2 * 0.5) = 1
    torch.testing.assert_close(dpo_loss("ipo", 0.5, policy, reference), torch.tensor([1.0, 0]))
    rewards = pair_rewards(0.5, policy, reference)
    torch.testing.assert_close(rewards.margins(), torch.tensor([0.0, 1.0]))  # beta * 2
    assert rewards.accuracies().tolist() == [0.0, 1.0]


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda p: dpo_loss("robust", 0.1, p, p), "unknown DPO loss 'robust'"),
        (lambda p: dpo_loss("sigmoid", 0.0, p, p), "beta must be"),
        (lambda p: dpo_loss("ipo", float("nan"), p, p), "beta must be"),
        (lambda p: simpo_loss(p, -1.0, 0.5), "beta must be"),
        (lambda p: orpo_loss(p, float("inf"), torch.tensor(1.0)), "beta must be"),
        (lambda p: grpo_loss("ppo", p.chosen[None], torch.ones(1, 2), torch.ones(1)), "GRPO"),
        (lambda p: group_advantages(p.chosen, 3), "group_size"),
        (lambda p: group_advantages(p.chosen, 2, "global"), "reward scale"),  # type: ignore[arg-type]
    ],
)
def test_bad_settings_are_one_line_config_errors(call, message) -> None:
    with pytest.raises(ConfigError, match=message) as error:
        call(pair([-3.0, -5.0], [-4.0, -4.0]))
    assert "\n" not in str(error.value)


def test_simpo_orpo_kto_and_reward_at_known_points() -> None:
    policy = pair([-2.0, -4.0], [-4.0, -4.0])  # means per token: -1, -2 and -2, -2
    torch.testing.assert_close(
        simpo_loss(policy, 2.0, 0.5), -F.logsigmoid(torch.tensor([1.0, -1.0]))
    )
    odds = orpo_loss(policy, 1.0, torch.tensor(0.0))
    p_chosen, p_rejected = math.exp(-1), math.exp(-2)
    log_odds = math.log(p_chosen / (1 - p_chosen)) - math.log(p_rejected / (1 - p_rejected))
    assert odds[0].item() == pytest.approx(-math.log(1 / (1 + math.exp(-log_odds))), rel=1e-6)
    assert odds[1].item() == pytest.approx(math.log(2), rel=1e-6)

    desirable = torch.tensor([True, False])
    kl = kto_kl(torch.tensor([-1.0, -3.0]), torch.tensor([-2.0, -2.0]))
    assert kl.item() == 0.0  # a negative estimate is floored at 0
    losses = kto_loss(1.0, torch.zeros(2), torch.zeros(2), desirable, kl, undesirable_weight=3.0)
    torch.testing.assert_close(losses, torch.tensor([0.5, 1.5]))

    margin = torch.tensor([1.0, 0.0])
    scores = reward_loss(torch.tensor([2.0, 0.0]), torch.tensor([1.0, 0.0]), margin)
    torch.testing.assert_close(scores, torch.full((2,), math.log(2)))
    centred = reward_loss(torch.tensor([1.0]), torch.tensor([1.0]), center_coefficient=0.1)
    torch.testing.assert_close(centred, torch.tensor([math.log(2) + 0.4]))


def test_group_advantages_are_normalised_within_each_group() -> None:
    rewards = torch.tensor([1.0, 2.0, 3.0, 5.0, 5.0, 5.0])
    advantages = group_advantages(rewards, 3)
    torch.testing.assert_close(advantages[:3], torch.tensor([-1.0, 0.0, 1.0]) / 1.0001)
    assert advantages[3:].eq(0).all()  # a group of equal rewards teaches nothing
    torch.testing.assert_close(group_advantages(rewards, 3, "none")[:3], torch.tensor([-1.0, 0, 1]))


def test_grpo_loss_on_policy_is_minus_the_mean_advantage_with_the_policy_gradient() -> None:
    logps = torch.tensor([[-1.0, -2.0, 0.0], [-0.5, -0.5, -0.5]], requires_grad=True)
    mask = torch.tensor([[1, 1, 0], [1, 1, 1]])
    advantages = torch.tensor([1.0, -1.0])
    dapo = grpo_loss("dapo", logps, mask, advantages)
    assert dapo.item() == pytest.approx((-2 + 3) / 5)
    grpo = grpo_loss("grpo", logps, mask, advantages)
    assert grpo.item() == pytest.approx(0.0)
    dapo.backward()
    # d/dlogp of -A * exp(logp - logp.detach()) / tokens: -A / 5 on each real token
    torch.testing.assert_close(logps.grad, torch.tensor([[-0.2, -0.2, 0.0], [0.2, 0.2, 0.2]]))
    with pytest.raises(ConfigError, match="reference"):
        grpo_loss("dapo", logps, mask, advantages, beta=0.1)
