"""A preference run (tasks `dpo`, `simpo`, `orpo`): its pairs read and encoded
(`adaptlab.runs.preference_data`), the model loaded as a causal LM with its adapter (stacked, it
may be, on an SFT adapter, which is then also the reference), dropout switched off as TRL's
trainers switch it off (the policy and its reference must read the same sequence alike), the
objective built (`PreferenceLm`), and after training the test scored with a sample of the
answers generated; an analysis reads the trained model with every split's chosen answers."""

from __future__ import annotations

import torch
from torch import nn
from transformers import PreTrainedTokenizerBase

from adaptlab.engine.adapters import attach_adapters
from adaptlab.engine.scale_model import prepare_base
from adaptlab.engine.trained_run import DecoderCollator, TrainedRun
from adaptlab.errors import ConfigError
from adaptlab.methods.handle import AdaptHandle
from adaptlab.models.decoder import check_causal_lm
from adaptlab.models.loading import load_model
from adaptlab.records.spec import RunSpec
from adaptlab.runs.generative_evaluation import AnswerScoring
from adaptlab.runs.generative_run import check_trains
from adaptlab.runs.preference_data import (
    EncodedPreferences,
    PreferenceSplit,
    Reading,
    encode_preferences,
)
from adaptlab.runs.preference_objective import PreferenceLm
from adaptlab.runs.preparers import prepares
from adaptlab.runs.split_run import SplitRun
from adaptlab.tasks.generative_facts import computed_metrics
from adaptlab.tasks.preference import PreferenceTask
from adaptlab.tasks.preference_settings import PreferenceSettings


class PreferenceRun(SplitRun, PreferenceLm):
    """`PreferenceLm` over a run's data, with what `execute` asks (`RunObjective`)."""

    def __init__(
        self,
        spec: RunSpec,
        task: PreferenceTask,
        model: nn.Module,
        tokenizer: PreTrainedTokenizerBase,
        handle: AdaptHandle,
        data: EncodedPreferences,
        settings: PreferenceSettings,
    ) -> None:
        scoring = AnswerScoring.of(settings.generative, task, spec.train.eval_batch_size)
        super().__init__(
            model,
            tokenizer,
            task,
            settings,
            data.splits["train"].pairs,
            data.splits["dev"],
            scoring,
        )
        self.spec, self.handle, self.encoded = spec, handle, data
        self.description = data.description

    def split_size(self, split: PreferenceSplit) -> int:
        return len(split.pairs)

    @property
    def trained(self) -> TrainedRun:
        """The model, its tokenizer and every split's chosen answers with their prompts, one a
        row, right-padded (`DecoderCollator`)."""
        features = {name: split.chosen.encoded for name, split in self.encoded.splits.items()}
        collator = DecoderCollator(self.pad_id)
        return TrainedRun(self.model, self.tokenizer, self.task.name, features, collator)


def checked_preference_settings(task: PreferenceTask, spec: RunSpec) -> PreferenceSettings:
    """The preference options of `spec`'s data for `task`, its judging metric one it computes."""
    settings = PreferenceSettings.of(spec.data_options, task)
    metric = settings.generative.metric
    known = (*computed_metrics(task),)
    if metric is not None and metric not in known:
        raise ConfigError(
            f"task {task.name} is not scored by {metric!r}; pick one of {', '.join(known)}"
        )
    return settings


def switch_off_dropout(model: nn.Module) -> None:
    """Every dropout module of `model` drops nothing (TRL's `disable_dropout`, on by default in
    its preference trainers)."""
    for module in model.modules():
        if isinstance(module, nn.Dropout):
            module.p = 0.0


def adapted_decoder(
    task: PreferenceTask, spec: RunSpec, device: torch.device
) -> tuple[nn.Module, PreTrainedTokenizerBase, AdaptHandle]:
    """`spec`'s model loaded as a causal LM on `device` with its adapter (stacked on any it
    names), dropout off (`switch_off_dropout`)."""
    check_causal_lm(spec.model, f"task {task.name}")
    loaded = load_model(spec.model, task.model_kind, seed=spec.train.seed)
    model: nn.Module = loaded.model
    prepare_base(model, spec.scale, device)
    handle = attach_adapters(model, spec, train_head=False)  # the LM head is pretrained
    check_trains(handle, spec, task.name)
    switch_off_dropout(model)
    return model, loaded.tokenizer, handle


@prepares(PreferenceTask)
def prepare_preference(task: PreferenceTask, spec: RunSpec, device: torch.device) -> PreferenceRun:
    """Read `spec`'s pairs for `task`, load its model as a causal LM on `device`, adapt it."""
    settings = checked_preference_settings(task, spec)
    model, tokenizer, handle = adapted_decoder(task, spec, device)
    data = encode_preferences(spec.data, task, settings, tokenizer, Reading.of_run(spec))
    if data.chat_template is not None:  # serving renders chats as training did
        handle.record_chat_template(data.chat_template)
    return PreferenceRun(spec, task, model, tokenizer, handle, data, settings)
