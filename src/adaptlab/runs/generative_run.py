"""A generative run (tasks `causal-lm`, `sft`, `chat`): the data read and sampled (a multi-task
run's data sets each so, then united: `adaptlab.runs.generative_union`), the model
loaded as a causal LM with its adapter, every split encoded with the loss on its target tokens
(`adaptlab.data.generative_encoding`, or document windows for plain text), the objective built
(`GenerativeLm`), and after training the test scored with a sample of its generations kept;
an analysis reads the trained model with every split's encoded examples (`trained`)."""

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
from adaptlab.runs.generative_data import EncodedData, encode_run_data
from adaptlab.runs.generative_evaluation import Generation, GenerativeSplit
from adaptlab.runs.generative_objective import GenerativeLm
from adaptlab.runs.generative_union import encoded_union
from adaptlab.runs.preparers import prepares
from adaptlab.runs.seq2seq_targets import check_windows
from adaptlab.runs.split_run import SplitRun
from adaptlab.tasks.generative import GenerativeTask
from adaptlab.tasks.generative_facts import GenerativeFacts, computed_metrics
from adaptlab.tasks.generative_settings import GenerativeSettings


class GenerativeRun(SplitRun, GenerativeLm):
    """`GenerativeLm` over a run's data, with what `execute` asks (`RunObjective`)."""

    def __init__(
        self,
        spec: RunSpec,
        task: GenerativeFacts,
        model: nn.Module,
        tokenizer: PreTrainedTokenizerBase,
        handle: AdaptHandle,
        data: EncodedData,
        settings: GenerativeSettings,
    ) -> None:
        metric = settings.metric or task.primary_metric
        generation = None
        if task.generates:
            generation = Generation.of(settings)
        super().__init__(
            model,
            tokenizer,
            data.splits["train"].encoded,
            data.splits["dev"],
            metric=metric,
            generation=generation,
            packed_length=spec.train.max_length if settings.pack else None,
            eval_batch_size=spec.train.eval_batch_size,
        )
        self.spec, self.task, self.handle, self.encoded = spec, task, handle, data
        self.description = data.description

    def split_size(self, split: GenerativeSplit) -> int:
        return len(split.encoded)

    @property
    def trained(self) -> TrainedRun:
        """The model, its tokenizer and every split's encoded examples; a decoder's batched
        one a row, right-padded (`DecoderCollator`), an encoder-decoder's not read layer by
        layer (no collator: its analyses are refused before it trains)."""
        features = {name: split.encoded for name, split in self.encoded.splits.items()}
        decoder = self.task.model_kind == "causal_lm"
        collator = DecoderCollator(self.pad_id) if decoder else None
        return TrainedRun(self.model, self.tokenizer, self.task.name, features, collator)


def checked_settings(task: GenerativeFacts, spec: RunSpec) -> GenerativeSettings:
    """The generative options of `spec`'s data for `task`, its judging metric one it computes."""
    settings = GenerativeSettings.of(spec.data_options, task.name)
    metric = settings.metric
    if metric is not None and metric not in computed_metrics(task):
        raise ConfigError(
            f"task {task.name} is not scored by {metric!r}; pick one of "
            f"{', '.join(computed_metrics(task))}"
        )
    return settings


def check_trains(handle: AdaptHandle, spec: RunSpec, task: str) -> None:
    """Refuse an adapter with nothing to train beside the frozen pretrained LM head."""
    if not handle.parameter_counts()["trainable"]:
        names = "+".join(config.name for config in spec.trained_configs)
        raise ConfigError(
            f"{names} trains nothing in a run of task {task}: the pretrained LM head stays "
            "frozen; pick a method that adapts the model (lora, houlsby, ...)"
        )


@prepares(GenerativeTask)
def prepare_generative(task: GenerativeFacts, spec: RunSpec, device: torch.device) -> GenerativeRun:
    """Read `spec`'s data for `task`, load its model as a causal LM on `device`, adapt it."""
    settings = checked_settings(task, spec)
    if task.model_kind != "seq2seq_lm":  # an encoder-decoder's head is checked as it loads
        check_causal_lm(spec.model, f"task {task.name}")
    loaded = load_model(spec.model, task.model_kind, seed=spec.train.seed)
    check_windows(loaded.model, spec.train.max_length, settings.max_new_tokens)
    tokenizer = loaded.tokenizer
    data = encode_run_data(task, spec, spec.data, settings, tokenizer)
    if spec.multi_task:
        data = encoded_union(task, spec, tokenizer, data)
    model: nn.Module = loaded.model
    prepare_base(model, spec.scale, device)
    handle = attach_adapters(model, spec, train_head=False)  # the LM head is pretrained
    check_trains(handle, spec, task.name)
    if data.chat_template is not None:  # serving renders chats as training did
        handle.record_chat_template(data.chat_template)
    return GenerativeRun(spec, task, model, tokenizer, handle, data, settings)
