"""`kto`: Kahneman-Tversky Optimization (Ethayarajh et al. 2024, Eq. 8) on unpaired data: each
answer judged desirable or not (TRL's prompt / completion / label), no pair needed. The
implicit reward beta * log(policy / reference) of a desirable answer is pushed above the
reference point z0, an undesirable one's below it; z0 is the policy's KL from the reference,
estimated on mismatched pairs (each prompt with the previous example's answer in its batch,
as TRL's `KTOTrainer` does). beta 0.1 and both weights 1 are TRL's defaults; with unbalanced
kinds, weights with lambda_D n_D / (lambda_U n_U) in [1, 4/3] are advised (TRL's `KTOTrainer`
warns outside that range). Dev is judged by the margin between the desirable and the
undesirable answers' mean rewards."""

from __future__ import annotations

from adaptlab.tasks.generation_metrics import GENERATION_METRICS
from adaptlab.tasks.preference import GENERATION_READ, REWARD_MARGIN, PreferenceTask
from adaptlab.tasks.registry import register_task

KL_ESTIMATE = "kl"
"""The batch estimate of the policy's KL from the reference (z0 / beta), averaged over dev."""


class UnpairedPreference(PreferenceTask):
    """A decoder tuned by KTO on answers judged desirable or undesirable."""

    name = "kto"
    summary = "preference tuning on unpaired answers judged desirable or not, against a reference"
    primary_metric = REWARD_MARGIN
    metrics = (REWARD_MARGIN, *GENERATION_METRICS)
    paired_metrics = (REWARD_MARGIN, "exact_match")
    data_shape = "unpaired"
    data_options = ("beta", "desirable_weight", "undesirable_weight", *GENERATION_READ)
    beta_default = 0.1


KTO = register_task(UnpairedPreference())
