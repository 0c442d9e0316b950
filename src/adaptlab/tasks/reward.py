"""`reward`: a Bradley-Terry reward model (Ouyang et al. 2022, Eq. 1; TRL's `RewardTrainer`): a
model with a head of one output scores a prompt with its answer, trained on TRL's prompt /
chosen / rejected pairs (`adaptlab.data.preference`) so that the chosen answer scores above the
rejected one. A decoder's sequence classifier scores at the last token that is not padding, an
encoder's at its pooled first token. Texts are tokenised as TRL tokenises them
(`adaptlab.data.reward_encoding`). Dev and test are scored by the share of pairs whose chosen
answer scores above the rejected one (a tie counts as wrong, as TRL counts it) and the mean
margin; served, an adapter of it gives each text its score. A run of it is prepared by
`adaptlab.runs.reward_run`."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from adaptlab.checks import shown
from adaptlab.data.chat_render import ChatTemplate
from adaptlab.data.reward_encoding import with_eos
from adaptlab.errors import ConfigError
from adaptlab.tasks.generative_settings import GenerativeSettings
from adaptlab.tasks.registry import register_task
from adaptlab.tasks.task import ScalarTargets

if TYPE_CHECKING:
    import torch

    from adaptlab.tasks.prediction import Prediction
    from adaptlab.tasks.task import RunAsked

PAIRWISE_ACCURACY = "pairwise_accuracy"
"""The share of pairs whose chosen text scores above the rejected one (TRL's `accuracy`)."""
REWARD_MARGIN = "reward_margin"
"""The mean score of the chosen texts minus that of the rejected (TRL's `margin`)."""
CHOSEN_SCORE = "chosen_score"
REJECTED_SCORE = "rejected_score"
"""The mean score of the chosen (rejected) texts."""
CENTER_OPTION = "center_rewards_coefficient"


class RewardModel(ScalarTargets):
    """A scalar head trained on preference pairs by the Bradley-Terry loss."""

    name = "reward"
    summary = "a reward model scoring texts, trained on chosen / rejected pairs"
    model_kind = "regression"
    labelled = False
    named_labels = False
    min_labels = 0
    primary_metric = PAIRWISE_ACCURACY
    metrics = (PAIRWISE_ACCURACY, REWARD_MARGIN)
    paired_metrics = (PAIRWISE_ACCURACY, REWARD_MARGIN)
    data_shape: ClassVar[str] = "preference"
    """How its data files are read (`adaptlab.data.preference_loading.load_preferences`)."""
    data_marker = "reward model"
    data_options = (CENTER_OPTION, "chat_template")

    def check_run(self, spec: RunAsked, analysed: bool) -> None:
        """Its options' values are checked before any work (`RewardSettings`)."""
        RewardSettings.of(spec.data_options)

    def input_text(self, text: str, eos_token: str | None) -> str:
        """A text to score as the training texts were written: ending with the EOS text."""
        return with_eos(text, eos_token)

    def prediction(
        self, text: str, logits: torch.Tensor, marks: torch.Tensor, label_names: Any
    ) -> Prediction:
        from adaptlab.tasks.prediction import Prediction

        return Prediction(text, None, None, score=float(logits.reshape(-1)[0]))


@dataclass(frozen=True)
class RewardSettings:
    """The data options of a reward run, validated: TRL's `center_rewards_coefficient` (None:
    no centring term) and the chat template conversations are rendered with (None: the
    tokenizer's)."""

    center_coefficient: float | None = None
    chat_template: ChatTemplate | None = None

    @classmethod
    def of(cls, options: Mapping[str, Any]) -> RewardSettings:
        """`options` (a spec's `data_options`); a bad value is one line naming it (an option the
        task does not read was refused before)."""
        value = options.get(CENTER_OPTION)
        if value is not None and (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
            or value < 0
        ):
            raise ConfigError(f"{CENTER_OPTION} must be a number of 0 or more, got {shown(value)}")
        template = {k: v for k, v in options.items() if k == "chat_template"}
        generative = GenerativeSettings.of(template, RewardModel.name)
        return cls(
            None if value is None else float(value),
            generative.chat_template_or(None),
        )


REWARD = register_task(RewardModel())
