"""The base of the preference tasks (`dpo`, `simpo`, `orpo`): a decoder taught to prefer one
answer to a prompt over another (TRL's prompt / chosen / rejected data,
`adaptlab.data.preference`). Every epoch scores dev by the implicit rewards of the pairs
(reward accuracy: the share of pairs whose chosen answer the model rewards more; the mean
margin; the chosen and rejected answers' log-probabilities) and by the `sft` metrics of the
answers it generates against the chosen ones. A run of one is prepared by
`adaptlab.runs.preference_run`; the losses are `adaptlab.engine.preference_loss`'s."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from adaptlab.tasks.generation_metrics import GENERATION_METRICS
from adaptlab.tasks.generative import GenerativeTask

if TYPE_CHECKING:
    from adaptlab.tasks.generative_settings import GenerativeSettings

REWARD_ACCURACY = "reward_accuracy"
"""The share of pairs whose chosen answer gets the higher implicit reward (a tie counts as
wrong, as TRL counts it)."""
REWARD_MARGIN = "reward_margin"
"""The mean implicit reward of the chosen answers minus that of the rejected."""
CHOSEN_LOGPS = "chosen_logps"
REJECTED_LOGPS = "rejected_logps"
"""The mean summed log-probability of the chosen (rejected) answers' tokens under the model."""

PREFERENCE_METRICS = (REWARD_ACCURACY, REWARD_MARGIN, CHOSEN_LOGPS)
"""The pair metrics where higher is better."""
GENERATION_READ = ("chat_template", "max_new_tokens", "stop", "metric")
"""The generation options a preference task reads (its dev and test generate answers)."""


class PreferenceTask(GenerativeTask):
    """A decoder tuned on preference pairs; a subclass names its objective."""

    primary_metric = REWARD_ACCURACY
    metrics = (*PREFERENCE_METRICS, *GENERATION_METRICS)
    paired_metrics = (REWARD_ACCURACY, "exact_match")
    data_shape = "preference"
    data_marker = "preference"
    data_options: ClassVar[tuple[str, ...]] = ("beta", *GENERATION_READ)
    learning_rate_factor = 0.05
    """DPO's 1e-6 for whole models (Rafailov et al. 2023, App. B) is 0.05 x full fine-tuning's
    default of 2e-5; the same factor on the generation defaults gives LoRA 1e-4, the rate
    `benchmarks/preference_quality.py` tunes with."""
    beta_default: ClassVar[float]
    """The objective's beta unless the run says (its paper's, or TRL's default)."""
    uses_reference: ClassVar[bool] = True
    """Whether the loss compares the model with a reference (DPO) or not (SimPO, ORPO)."""

    def settings(self, options: Mapping[str, Any]) -> GenerativeSettings:
        """`options` checked as a preference run reads them (`PreferenceSettings`): the
        generative settings its dev and test generate by."""
        from adaptlab.tasks.preference_settings import PreferenceSettings

        return PreferenceSettings.of(options, self).generative
