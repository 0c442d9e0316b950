"""A reward-model run (task `reward`): its pairs read (sampled and capped as a run samples and caps
preference data) and encoded as TRL's `RewardTrainer` encodes them
(`adaptlab.data.reward_encoding`), the model loaded with a head of one output (a decoder's or an
encoder's sequence classifier) whose padding token is the tokenizer's, as TRL sets it, its
adapter attached with the head trained beside it, dropout switched off as TRL's trainer switches
it off, and the objective built (`RewardPairs`); after training the test pairs are scored the
same way. An analysis reads the trained model with every split's chosen texts."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch
from torch import nn
from transformers import PreTrainedTokenizerBase

from adaptlab.data.generative_encoding import EncodedExample
from adaptlab.data.preference import Preference, is_conversation
from adaptlab.data.reward_encoding import RewardEncoder, ScoredPair
from adaptlab.data.types import SPLIT_NAMES, Origin
from adaptlab.engine.adapters import attach_adapters
from adaptlab.engine.scale_model import prepare_base
from adaptlab.engine.trained_run import DecoderCollator, TrainedRun
from adaptlab.errors import ConfigError, DataError
from adaptlab.methods.handle import AdaptHandle
from adaptlab.models.loading import load_model
from adaptlab.records.spec import RunSpec
from adaptlab.runs.preference_data import Reading, read_corpus
from adaptlab.runs.preference_run import switch_off_dropout
from adaptlab.runs.preparers import prepares
from adaptlab.runs.reward_objective import RewardPairs
from adaptlab.runs.split_run import SplitRun
from adaptlab.tasks.reward import RewardModel, RewardSettings

log = logging.getLogger("adaptlab.train")


@dataclass(frozen=True)
class RewardData:
    """Every split's encoded pairs, how many were left out of each, where the kept ones came
    from, and the chat template conversations were rendered with (None: there were none)."""

    name: str
    description: str
    splits: Mapping[str, Sequence[ScoredPair]]
    dropped: Mapping[str, int]
    origins: Mapping[str, tuple[Origin | None, ...]] | None
    chat_template: str | None = None


def encode_reward_data(
    data: str,
    task: RewardModel,
    settings: RewardSettings,
    tokenizer: PreTrainedTokenizerBase,
    reading: Reading,
) -> RewardData:
    """`data` read as preference pairs and encoded as `reading` says (`Reading.of_run`: as a
    run reads its data), chats rendered with `settings`' template file, else `reading`'s
    template, else the tokenizer's."""
    corpus = read_corpus(data, task.data_shape, reading)
    template = settings.chat_template or reading.template
    encoder = RewardEncoder(tokenizer, reading.max_length, chat_template=template)
    splits: dict[str, list[ScoredPair]] = {}
    dropped: dict[str, int] = {}
    origins: dict[str, tuple[Origin | None, ...]] = {}
    conversations = False
    for name in SPLIT_NAMES:
        examples = corpus.splits[name]
        splits[name], kept = [], []
        for position, example in enumerate(examples):
            if not isinstance(example, Preference):
                raise DataError(f"{corpus.name} holds {type(example).__name__} rows, not pairs")
            conversations = conversations or is_conversation(example.prompt)
            pair = encoder.pair(example)
            if pair is not None:
                splits[name].append(pair)
                kept.append(position)
        dropped[name] = len(examples) - len(kept)
        if dropped[name]:
            log.info(
                "%d %s pairs left out: a text is over %d tokens",
                *(dropped[name], name, reading.max_length),
            )
        if not splits[name]:
            raise DataError(
                f"the {name} split of {corpus.name} has no pair that fits; raise --max-length"
            )
        if corpus.origins is not None:
            origins[name] = tuple(corpus.origins[name][i] for i in kept)
    chat = None
    if conversations:
        chat = template.text if template is not None else tokenizer.chat_template
    return RewardData(
        corpus.name,
        corpus.description,
        splits,
        dropped,
        origins if corpus.origins is not None else None,
        chat,
    )


class RewardRun(SplitRun, RewardPairs):
    """`RewardPairs` over a run's data, with what `execute` asks (`RunObjective`)."""

    def __init__(
        self,
        spec: RunSpec,
        task: RewardModel,
        model: nn.Module,
        tokenizer: PreTrainedTokenizerBase,
        handle: AdaptHandle,
        data: RewardData,
        settings: RewardSettings,
    ) -> None:
        super().__init__(
            model,
            data.splits["train"],
            data.splits["dev"],
            pad_id=tokenizer.pad_token_id,
            center_coefficient=settings.center_coefficient,
            eval_batch_size=spec.train.eval_batch_size,
        )
        self.spec, self.task, self.tokenizer, self.handle = spec, task, tokenizer, handle
        self.encoded = data
        self.description = data.description

    @property
    def trained(self) -> TrainedRun:
        """The model, its tokenizer and every split's chosen texts, one a row, right-padded
        (`DecoderCollator`); every token of a text is read (the score reads the whole text)."""
        features = {
            name: [EncodedExample(pair.chosen, pair.chosen) for pair in pairs]
            for name, pairs in self.encoded.splits.items()
        }
        collator = DecoderCollator(self.pad_id)
        return TrainedRun(self.model, self.tokenizer, self.task.name, features, collator)


@prepares(RewardModel)
def prepare_reward(task: RewardModel, spec: RunSpec, device: torch.device) -> RewardRun:
    """Read `spec`'s pairs, load its model with a head of one output on `device`, adapt it (the
    head trains with the adapter)."""
    settings = RewardSettings.of(spec.data_options)
    loaded = load_model(spec.model, task.model_kind, seed=spec.train.seed)
    tokenizer = loaded.tokenizer
    if tokenizer.pad_token_id is None:
        raise ConfigError(
            f"the tokenizer of {spec.model} has neither a padding nor an EOS token to pad pairs "
            "with; give a model whose tokenizer has one"
        )
    data = encode_reward_data(spec.data, task, settings, tokenizer, Reading.of_run(spec))
    # the head reads the last token that is not padding: padding is the tokenizer's, as in TRL
    loaded.model.config.get_text_config().pad_token_id = tokenizer.pad_token_id
    model: nn.Module = loaded.model
    prepare_base(model, spec.scale, device)
    handle = attach_adapters(model, spec, train_head=True)
    if data.chat_template is not None:
        handle.record_chat_template(data.chat_template)
    switch_off_dropout(model)
    return RewardRun(spec, task, model, tokenizer, handle, data, settings)
