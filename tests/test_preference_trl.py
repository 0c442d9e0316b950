"""The preference losses and completion log-probabilities equal TRL 1.16's, within 1e-5.

Each test builds TRL's own trainer on a tiny in-memory dataset, a word-level tokenizer and
tiny random Llamas (nothing downloaded), takes a batch from the trainer's dataloader (its
tokenisation and collator), asks TRL for its loss (`trainer.compute_loss`) and its
per-sequence log-probabilities, and compares them with `adaptlab.engine.completion_logps` and
`adaptlab.engine.preference_loss` on the same ids, masks and models. DPO and GRPO compare the
policy's gradients too.

GRPO's batch is made by TRL itself (`_generate_and_score_completions`: it samples completions
from the tiny policy on the CPU and scores them with a reward function given here), called
directly rather than through `_prepare_inputs`, which would shuffle the rows away from the
order of the rewards; with `num_iterations` 2 it comes through `_prepare_inputs`, whose buffer
serves both steps (nothing there is compared by row order). Its loss is TRL's `compute_loss` in
eval mode (train mode divides by gradient-accumulation counters the training loop sets).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
import transformers as T

from adaptlab.engine.completion_logps import (
    completion_log_probs,
    completion_token_log_probs,
    head_completion_log_probs,
)
from adaptlab.engine.lm_head_capture import LmHeadInput, lm_head_input
from adaptlab.engine.lm_loss import next_token_loss
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

trl = pytest.importorskip("trl")
datasets = pytest.importorskip("datasets")
tokenizers = pytest.importorskip("tokenizers")

TOLERANCE = {"atol": 1e-5, "rtol": 1e-5}
WORDS = (
    ("<pad>", "<unk>", "<s>", "</s>", "the", "a", "cat", "dog", "bird", "fish", "sat", "ran")
    + ("on", "under", "mat", "rug", "is", "was", "big", "small", "red", "blue", "yes", "no")
    + ("what", "who", "and", "or")
)
PROMPTS = ["the cat", "a dog is", "what bird", "who ran", "the fish", "is the rug"]
CHOSEN = [" sat on the mat", " big", " is red", " the fish ran", " is blue", " red"]
REJECTED = [" ran", " small and blue", " was", " no", " sat under a rug", " yes or no"]


def close(name: str, ours: torch.Tensor, theirs: torch.Tensor) -> None:
    """Assert within 1e-5 and print the largest difference (shown with pytest -s)."""
    ours, theirs = ours.detach().float(), theirs.detach().float().to(ours.device)
    torch.testing.assert_close(ours, theirs, **TOLERANCE)
    print(f"max |ours - TRL| {name}: {(ours - theirs).abs().max().item():.3g}")


@pytest.fixture(scope="module")
def tokenizer() -> T.PreTrainedTokenizerFast:
    """A word-level tokenizer over WORDS: <pad> 0, <s> 2, </s> 3 (EOS)."""
    model = tokenizers.models.WordLevel({w: i for i, w in enumerate(WORDS)}, unk_token="<unk>")
    backend = tokenizers.Tokenizer(model)
    backend.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    backend.decoder = tokenizers.decoders.WordPiece()
    return T.PreTrainedTokenizerFast(
        tokenizer_object=backend,
        pad_token="<pad>",
        eos_token="</s>",
        bos_token="<s>",
        unk_token="<unk>",
    )


def tiny_llama(seed: int, *, classifier: bool = False) -> T.PreTrainedModel:
    torch.manual_seed(seed)
    config = T.LlamaConfig(
        vocab_size=len(WORDS),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=64,
        pad_token_id=0,
        bos_token_id=2,
        eos_token_id=3,
        num_labels=1,
    )
    auto = T.AutoModelForSequenceClassification if classifier else T.AutoModelForCausalLM
    return auto.from_config(config)


def arguments(config_class: type, tmp_path: Path, **options: Any) -> Any:
    return config_class(
        str(tmp_path),
        report_to="none",
        use_cpu=True,
        bf16=False,
        disable_tqdm=True,
        seed=0,
        **options,
    )


def first_batch(trainer: Any) -> Any:
    return next(iter(trainer.get_train_dataloader()))


def stacked_trainer(
    config_class: Any, trainer_class: Any, tmp_path: Path, tokenizer: Any, **options: Any
) -> Any:
    """A trainer of stacked chosen and rejected rows (CPO, ORPO) on the pairs and the tiny
    Llama, 4 pairs a batch of at most 32 tokens, its config given `options`."""
    config = arguments(
        config_class,
        tmp_path,
        per_device_train_batch_size=4,
        max_length=32,
        remove_unused_columns=False,
        **options,
    )
    return trainer_class(
        model=tiny_llama(0), args=config, train_dataset=pairs(), processing_class=tokenizer
    )


def stacked_rows(
    trainer: Any, padding_value: int
) -> tuple[Any, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The trainer's first batch, then its chosen rows over its rejected ones: their input ids,
    attention mask and completion mask."""
    batch = first_batch(trainer)
    rows = trainer.concatenated_inputs(batch, padding_value=padding_value)
    completion_mask = (rows["concatenated_labels"] != -100).long()
    input_ids, attention_mask = rows["concatenated_input_ids"], rows["concatenated_attention_mask"]
    return batch, input_ids, attention_mask, completion_mask


@pytest.fixture(autouse=True)
def quiet() -> Iterator[None]:
    """TRL's deprecation and experimental-API notices are not what these tests check."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def pairs() -> Any:
    return datasets.Dataset.from_dict({"prompt": PROMPTS, "chosen": CHOSEN, "rejected": REJECTED})


def trl_sequence_logps(model: Any, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """TRL's per-sequence completion log-probabilities, as its DPO `_compute_loss` gets them."""
    labels = batch["input_ids"].masked_fill(batch["completion_mask"] == 0, -100)
    outputs = model(
        input_ids=batch["input_ids"],
        attention_mask=batch["attention_mask"],
        labels=labels,
        fused_lm_head=True,
        use_cache=False,
    )
    logps: torch.Tensor = outputs.log_probs.sum(1)
    return logps


def gradients(model: torch.nn.Module, loss: Callable[[], torch.Tensor]) -> torch.Tensor:
    model.zero_grad()
    loss().backward()
    grads = [p.grad.flatten() for p in model.parameters() if p.grad is not None]
    model.zero_grad()
    return torch.cat(grads)


@pytest.mark.parametrize("kind", ("sigmoid", "ipo", "hinge"))
def test_dpo_losses_equal_trl(kind: str, tokenizer: Any, tmp_path: Path) -> None:
    beta = 0.3 if kind != "ipo" else 0.5
    config = arguments(
        trl.DPOConfig, tmp_path, per_device_train_batch_size=4, beta=beta, loss_type=[kind]
    )
    trainer = trl.DPOTrainer(
        model=tiny_llama(0),
        ref_model=tiny_llama(1),
        args=config,
        train_dataset=pairs(),
        processing_class=tokenizer,
    )
    model, reference = trainer.model, trainer.ref_model
    batch = first_batch(trainer)
    # (a chunk of 3 positions: the LM head runs in several chunks even on this tiny batch)
    rows = (batch["input_ids"], batch["attention_mask"], batch["completion_mask"])
    ours = completion_log_probs(model, *rows, chunk_size=3)
    with torch.no_grad():
        ours_reference = completion_log_probs(reference, *rows)
        close(f"DPO {kind} policy log-probs", ours.sums, trl_sequence_logps(model, batch))
        close(
            f"DPO {kind} reference log-probs",
            ours_reference.sums,
            trl_sequence_logps(reference, batch),
        )
    assert torch.equal(ours.tokens, batch["completion_mask"][:, 1:].sum(1))
    policy = PairLogps.stacked(ours.sums, ours.tokens)
    frozen = PairLogps.stacked(ours_reference.sums, ours_reference.tokens)
    assert not torch.allclose(policy.chosen, frozen.chosen, atol=1e-2)

    trainer._metrics["train"].clear()
    theirs = trainer.compute_loss(model, batch)
    close(f"DPO {kind} loss", dpo_loss(kind, beta, policy, frozen).mean(), theirs)
    logged = trainer._metrics["train"]
    rewards = pair_rewards(beta, policy, frozen)
    for name, value in (
        ("rewards/chosen", rewards.chosen.mean()),
        ("rewards/rejected", rewards.rejected.mean()),
        ("rewards/margins", rewards.margins().mean()),
        ("rewards/accuracies", rewards.accuracies().mean()),
        ("logps/chosen", policy.chosen.mean()),
    ):
        close(f"DPO {kind} {name}", value, torch.tensor(logged[name][-1]))

    if kind == "sigmoid":

        def ours_loss() -> torch.Tensor:
            logps = completion_log_probs(model, *rows, chunk_size=3)
            return dpo_loss(kind, beta, PairLogps.stacked(logps.sums, logps.tokens), frozen).mean()

        close(
            "DPO sigmoid gradient",
            gradients(model, ours_loss),
            gradients(model, lambda: trainer.compute_loss(model, batch)),
        )


def test_simpo_equals_trl_cpo_trainer(tokenizer: Any, tmp_path: Path) -> None:
    from trl.experimental.cpo import CPOConfig, CPOTrainer

    beta, gamma = 2.0, 0.8
    options = dict(loss_type="simpo", cpo_alpha=0.0, beta=beta, simpo_gamma=gamma)
    trainer = stacked_trainer(CPOConfig, CPOTrainer, tmp_path, tokenizer, **options)
    model = trainer.model
    batch, *rows = stacked_rows(trainer, tokenizer.pad_token_id)
    ours = completion_log_probs(model, *rows)
    policy = PairLogps.stacked(ours.sums, ours.tokens)
    with torch.no_grad():
        chosen, rejected = trainer.concatenated_forward(model, batch)[:2]
    close("SimPO chosen mean log-probs", policy.chosen_means(), chosen)
    close("SimPO rejected mean log-probs", policy.rejected_means(), rejected)
    theirs = trainer.compute_loss(model, batch)
    close("SimPO loss", simpo_loss(policy, beta, gamma / beta).mean(), theirs)


def test_orpo_equals_trl_orpo_trainer(tokenizer: Any, tmp_path: Path) -> None:
    from trl.experimental.orpo import ORPOConfig, ORPOTrainer

    beta = 0.25
    trainer = stacked_trainer(ORPOConfig, ORPOTrainer, tmp_path, tokenizer, beta=beta)
    model = trainer.model
    batch, input_ids, attention_mask, completion_mask = stacked_rows(trainer, trainer.padding_value)
    # one forward serves both terms: the chosen rows' likelihood and every row's odds
    head = lm_head_input(model, input_ids=input_ids, attention_mask=attention_mask)
    ours = head_completion_log_probs(head, input_ids, completion_mask)
    policy = PairLogps.stacked(ours.sums, ours.tokens)
    chosen_rows = input_ids.shape[0] // 2
    labels = input_ids.masked_fill(attention_mask == 0, -100)[:chosen_rows]
    chosen_head = LmHeadInput(head.hidden[:chosen_rows], head.weight, head.bias)
    chosen_nll = next_token_loss(chosen_head, labels).mean()
    with torch.no_grad():
        chosen, rejected, _, _, nll = trainer.concatenated_forward(model, batch)
    close("ORPO chosen mean log-probs", policy.chosen_means(), chosen)
    close("ORPO rejected mean log-probs", policy.rejected_means(), rejected)
    close("ORPO chosen NLL", chosen_nll, nll)
    theirs = trainer.compute_loss(model, batch)
    close("ORPO loss", orpo_loss(policy, beta, chosen_nll).mean(), theirs)


def test_reward_loss_equals_trl_reward_trainer(tokenizer: Any, tmp_path: Path) -> None:
    coefficient = 0.01
    data = pairs().add_column("margin", [0.5, 0.0, 1.0, -0.25, 0.75, 0.1])
    config = arguments(
        trl.RewardConfig,
        tmp_path,
        per_device_train_batch_size=4,
        center_rewards_coefficient=coefficient,
    )
    trainer = trl.RewardTrainer(
        model=tiny_llama(0, classifier=True),
        args=config,
        train_dataset=data,
        processing_class=tokenizer,
    )
    model = trainer.model
    batch = first_batch(trainer)
    scores = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
    chosen, rejected = scores.logits.squeeze(-1).chunk(2)
    ours = reward_loss(chosen, rejected, batch["margin"], center_coefficient=coefficient)
    close("reward loss", ours.mean(), trainer.compute_loss(model, dict(batch)))
    uncentred = reward_loss(chosen, rejected, batch["margin"]).mean()
    assert (ours.mean() - uncentred).abs() > 1e-4  # the centring term counts
    plain = reward_loss(chosen, rejected).mean()
    trainer.args.center_rewards_coefficient = None
    batch.pop("margin")
    close("reward loss without margin", plain, trainer.compute_loss(model, dict(batch)))


def test_kto_equals_trl_kto_trainer(tokenizer: Any, tmp_path: Path) -> None:
    beta, desirable_weight, undesirable_weight = 1.0, 1.0, 1.5
    data = datasets.Dataset.from_dict(
        {
            "prompt": PROMPTS + PROMPTS[:2],
            "completion": CHOSEN + REJECTED[:2],
            "label": [True, False, True, True, False, False, False, True],
        }
    )
    config = arguments(
        trl.KTOConfig,
        tmp_path,
        per_device_train_batch_size=4,
        beta=beta,
        desirable_weight=desirable_weight,
        undesirable_weight=undesirable_weight,
    )
    trainer = trl.KTOTrainer(
        model=tiny_llama(0),
        ref_model=tiny_llama(6),  # a seed whose KL estimate on this batch is > 0 (not clamped)
        args=config,
        train_dataset=data,
        processing_class=tokenizer,
    )
    model, reference = trainer.model, trainer.ref_model
    batch = first_batch(trainer)
    assert batch["label"].any() and not batch["label"].all()
    rows = (batch["input_ids"], batch["attention_mask"], batch["completion_mask"])
    mismatched = (batch["KL_input_ids"], batch["KL_attention_mask"], batch["KL_completion_mask"])
    ours = completion_log_probs(model, *rows)
    with torch.no_grad():
        close("KTO policy log-probs", ours.sums, trl_sequence_logps(model, batch))
        ours_reference = completion_log_probs(reference, *rows).sums
        kl = kto_kl(
            completion_log_probs(model, *mismatched).sums,
            completion_log_probs(reference, *mismatched).sums,
        )
        policy_kl = trainer._compute_kl_logps(model, batch)
        reference_kl = trainer._compute_kl_logps(reference, batch)
    assert kl > 0.01
    close("KTO KL estimate", kl, (policy_kl - reference_kl).mean().clamp(min=0))
    trainer._metrics["train"].clear()
    theirs = trainer.compute_loss(model, batch)
    close("KTO logged KL", kl, torch.tensor(trainer._metrics["train"]["kl"][-1]))
    losses = kto_loss(
        beta,
        ours.sums,
        ours_reference,
        batch["label"],
        kl,
        desirable_weight=desirable_weight,
        undesirable_weight=undesirable_weight,
    )
    close("KTO loss", losses.mean(), theirs)


GROUP, GRPO_BETA = 4, 0.1
"""GRPO's group size and KL coefficient in these comparisons."""


def grpo_trainer(tokenizer: Any, tmp_path: Path, given: list[float], **options: Any) -> Any:
    """TRL's GRPOTrainer on the tiny Llama (groups of 4, beta 0.1, `options` beside), its
    reference moved off the policy so the KL term counts; the rewards it asks for are kept in
    `given`."""

    def reward(completions: list[str], **kwargs: Any) -> list[float]:
        values = [float(len(text.split())) + 0.5 * text.count("the") for text in completions]
        given.extend(values)
        return values

    folder = tmp_path / "policy"
    tiny_llama(0).save_pretrained(folder)  # GRPO loads its reference model from the policy's path
    config = arguments(
        trl.GRPOConfig,
        tmp_path / "out",
        per_device_train_batch_size=8,
        num_generations=GROUP,
        max_completion_length=6,
        beta=GRPO_BETA,
        **options,
    )
    trainer = trl.GRPOTrainer(
        model=T.AutoModelForCausalLM.from_pretrained(folder),
        reward_funcs=[reward],
        args=config,
        train_dataset=datasets.Dataset.from_dict({"prompt": PROMPTS}),
        processing_class=tokenizer,
    )
    generator = torch.Generator().manual_seed(2)
    with torch.no_grad():  # a reference that differs from the policy, so the KL term counts
        for parameter in trainer.ref_model.parameters():
            parameter.add_(0.05 * torch.randn(parameter.shape, generator=generator))
    return trainer


def grpo_rows(inputs: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, int]:
    """A TRL batch's ids, attention mask, completion-token mask and completion width."""
    completion_mask = inputs["completion_mask"]
    input_ids = torch.cat([inputs["prompt_ids"], inputs["completion_ids"]], 1)
    attention_mask = torch.cat([inputs["prompt_mask"], completion_mask], 1)
    scored = torch.cat([torch.zeros_like(inputs["prompt_mask"]), completion_mask], 1)
    return input_ids, attention_mask, scored, completion_mask.shape[1]


def test_grpo_equals_trl_grpo_trainer(tokenizer: Any, tmp_path: Path) -> None:
    given: list[float] = []
    trainer = grpo_trainer(tokenizer, tmp_path, given)
    assert trainer.loss_type == "dapo"
    model, reference = trainer.model, trainer.ref_model
    model.eval()
    torch.manual_seed(3)
    inputs = trainer._generate_and_score_completions(first_batch(trainer))
    completion_mask = inputs["completion_mask"]
    assert completion_mask.sum(1).unique().numel() > 1  # completions of several lengths
    assert "old_per_token_logps" not in inputs  # one step per generation: the policy's own

    close(
        "GRPO advantages",
        group_advantages(torch.tensor(given), GROUP, "group"),
        inputs["advantages"],
    )
    input_ids, attention_mask, scored, width = grpo_rows(inputs)
    with torch.no_grad():
        reference_logps = completion_token_log_probs(reference, input_ids, attention_mask, scored)[
            :, -width:
        ]
        theirs_logps = trainer._get_per_token_logps_and_entropies(
            model, input_ids, attention_mask, width
        )[0]
        ours_logps = completion_token_log_probs(model, input_ids, attention_mask, scored)
    close("GRPO reference per-token log-probs", reference_logps, inputs["ref_per_token_logps"])
    close("GRPO policy per-token log-probs", ours_logps[:, -width:], theirs_logps)

    def ours() -> torch.Tensor:
        logps = completion_token_log_probs(model, input_ids, attention_mask, scored)[:, -width:]
        return grpo_loss(
            "dapo",
            logps,
            completion_mask,
            inputs["advantages"],
            reference_logps=reference_logps,
            beta=GRPO_BETA,
        )

    close("GRPO (dapo) loss", ours(), trainer.compute_loss(model, inputs))
    without_kl = grpo_loss("dapo", ours_logps[:, -width:], completion_mask, inputs["advantages"])
    assert (ours() - without_kl).abs() > 1e-4  # the reference's KL term counts
    close(
        "GRPO (dapo) gradient",
        gradients(model, ours),
        gradients(model, lambda: trainer.compute_loss(model, inputs)),
    )
    trainer.loss_type = "grpo"
    close(
        "GRPO (grpo) loss",
        grpo_loss(
            "grpo",
            ours_logps[:, -width:],
            completion_mask,
            inputs["advantages"],
            reference_logps=reference_logps,
            beta=GRPO_BETA,
        ),
        trainer.compute_loss(model, inputs),
    )


@pytest.mark.parametrize("kind", ("dapo", "grpo"))
def test_grpo_second_step_on_a_generation_equals_trl(
    kind: str, tokenizer: Any, tmp_path: Path
) -> None:
    """num_iterations 2 with clip-higher: TRL buffers one generation for both steps
    (`_prepare_inputs`, steps_per_generation 1) with the sampling policy's log-probabilities
    taken as it generates; after a step of the policy, its loss and gradient on the buffered
    batch are ours against the log-probabilities kept."""
    epsilon, epsilon_high = 0.2, 0.28
    trainer = grpo_trainer(
        tokenizer,
        tmp_path,
        [],
        num_iterations=2,
        epsilon=epsilon,
        epsilon_high=epsilon_high,
        loss_type=kind,
    )
    model = trainer.model
    model.train()  # the trainer buffers generations in training mode only
    torch.manual_seed(3)
    generation = first_batch(trainer)
    trainer._step = 0
    inputs = trainer._prepare_inputs(generation)
    trainer._step = 1
    assert trainer._prepare_inputs(generation) is inputs  # the second step reuses the first's
    model.eval()
    input_ids, attention_mask, scored, width = grpo_rows(inputs)
    completion_mask, advantages = inputs["completion_mask"], inputs["advantages"]
    with torch.no_grad():
        old = completion_token_log_probs(model, input_ids, attention_mask, scored)[:, -width:]
    close(
        f"GRPO ({kind}) sampling policy's per-token log-probs", old, inputs["old_per_token_logps"]
    )

    def loss(logps: torch.Tensor, **clip: float) -> torch.Tensor:
        """Our loss of `logps` on the buffered batch, against the log-probabilities kept."""
        return grpo_loss(
            kind,
            logps,
            completion_mask,
            advantages,
            old_logps=old,
            reference_logps=inputs["ref_per_token_logps"],
            beta=GRPO_BETA,
            epsilon=epsilon,
            **clip,
        )

    def ours() -> torch.Tensor:
        logps = completion_token_log_probs(model, input_ids, attention_mask, scored)[:, -width:]
        return loss(logps, epsilon_high=epsilon_high)

    close(f"GRPO ({kind}) first step's loss", ours(), trainer.compute_loss(model, inputs))
    model.zero_grad()
    trainer.compute_loss(model, inputs).backward()
    with torch.no_grad():  # the first step: plain gradient descent, large enough to clip
        for parameter in model.parameters():
            parameter -= 20.0 * parameter.grad
    model.zero_grad()
    with torch.no_grad():
        moved = completion_token_log_probs(model, input_ids, attention_mask, scored)[:, -width:]
        ratio = torch.exp(moved - old)[completion_mask.bool()]
        rising = (advantages[:, None].expand_as(moved) > 0)[completion_mask.bool()]
    assert ((ratio > 1 + epsilon) & rising).any()  # past the symmetric clip: epsilon_high counts
    close(f"GRPO ({kind}) second step's loss", ours(), trainer.compute_loss(model, inputs))
    close(
        f"GRPO ({kind}) second step's gradient",
        gradients(model, ours),
        gradients(model, lambda: trainer.compute_loss(model, inputs)),
    )
    assert (ours() - loss(moved)).abs() > 1e-4
