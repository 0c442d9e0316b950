"""A KTO run (task `kto`): its judged answers read and encoded
(`adaptlab.runs.preference_data.encode_judged`), the model loaded and adapted as a preference
run's (`adaptlab.runs.preference_run.adapted_decoder`), the objective built (`KtoLm`), and
after training the test scored with a sample of the answers generated."""

from __future__ import annotations

import torch
from torch import nn
from transformers import PreTrainedTokenizerBase

from adaptlab.engine.trained_run import DecoderCollator, TrainedRun
from adaptlab.errors import ConfigError
from adaptlab.methods.handle import AdaptHandle
from adaptlab.records.spec import RunSpec
from adaptlab.runs.generative_evaluation import AnswerScoring
from adaptlab.runs.kto_objective import KtoLm
from adaptlab.runs.preference_data import EncodedJudgements, JudgedSplit, Reading, encode_judged
from adaptlab.runs.preference_run import adapted_decoder, checked_preference_settings
from adaptlab.runs.preparers import prepares
from adaptlab.runs.split_run import SplitRun
from adaptlab.tasks.kto import UnpairedPreference
from adaptlab.tasks.preference_settings import PreferenceSettings


class KtoRun(SplitRun, KtoLm):
    """`KtoLm` over a run's data, with what `execute` asks (`RunObjective`)."""

    def __init__(
        self,
        spec: RunSpec,
        task: UnpairedPreference,
        model: nn.Module,
        tokenizer: PreTrainedTokenizerBase,
        handle: AdaptHandle,
        data: EncodedJudgements,
        settings: PreferenceSettings,
    ) -> None:
        scoring = AnswerScoring.of(settings.generative, task, spec.train.eval_batch_size)
        super().__init__(
            model,
            tokenizer,
            settings,
            data.splits["train"].answers,
            data.splits["dev"],
            scoring,
        )
        self.spec, self.task, self.handle, self.encoded = spec, task, handle, data
        self.description = data.description

    def split_size(self, split: JudgedSplit) -> int:
        return len(split.answers)

    @property
    def trained(self) -> TrainedRun:
        """The model, its tokenizer and every split's answers with their prompts."""
        features = {
            name: [a.answer for a in split.answers] for name, split in self.encoded.splits.items()
        }
        collator = DecoderCollator(self.pad_id)
        return TrainedRun(self.model, self.tokenizer, self.task.name, features, collator)


@prepares(UnpairedPreference)
def prepare_kto(task: UnpairedPreference, spec: RunSpec, device: torch.device) -> KtoRun:
    """Read `spec`'s judged answers, load its model as a causal LM on `device`, adapt it."""
    if spec.train.batch_size < 2:
        raise ConfigError(
            "kto estimates its reference point from each batch's mismatched answers; give "
            "--batch-size 2 or more"
        )
    settings = checked_preference_settings(task, spec)
    model, tokenizer, handle = adapted_decoder(task, spec, device)
    data = encode_judged(spec.data, task, settings, tokenizer, Reading.of_run(spec))
    if data.chat_template is not None:
        handle.record_chat_template(data.chat_template)
    return KtoRun(spec, task, model, tokenizer, handle, data, settings)
