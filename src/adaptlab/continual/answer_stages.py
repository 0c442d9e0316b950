"""The stages of an sft or chat sequence: each stage's data entry read, sampled to the sequence's
sizes, its test split capped and every split encoded by `adaptlab train`'s own reader
(`encode_data`: the same columns, chat templates, `--max-length` rules and answer masks, an
answer that does not fit left out and counted); the model loaded as a causal LM; a stage
trained as a `TextStageRun` on its encoded examples (the loss on their answers' tokens) and
tested as `adaptlab train` tests a generative run (`score_split`): the perplexity of the
answers' tokens, and the greedy answers generated and scored."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from transformers import PreTrainedTokenizerBase

from adaptlab.continual.corpus_run import TextStage, TextStageRun
from adaptlab.continual.objectives import refuse_unread_by_objective
from adaptlab.continual.sequence_objective import (
    NOT_IN_A_SEQUENCE,
    SequenceSettings,
)
from adaptlab.continual.stages import KeptAdapter
from adaptlab.data.builtin import BUILTINS
from adaptlab.engine.scale_model import prepare_base
from adaptlab.errors import AdaptlabError, ConfigError
from adaptlab.models.loading import load_model, load_tokenizer
from adaptlab.runs.generative_data import EncodedData, encode_data
from adaptlab.runs.generative_evaluation import Generation, score_split
from adaptlab.tasks.generative import GenerativeTask
from adaptlab.tasks.generative_settings import GenerativeSettings
from adaptlab.tasks.registry import get_task

EXACT_MATCH = "exact_match"
"""The generated answers' score every sft and chat stage reports beside its perplexity."""


@dataclass(frozen=True)
class AnswerData:
    """One stage's data as `adaptlab train` encodes it, and how its answers are generated and
    scored at test."""

    encoded: EncodedData
    generation: Generation


def declared_task(source: str, options: Mapping[str, Any]) -> str | None:
    """The task stage `source` names in its options, or a labelled built-in's own task."""
    declared = options.get("task") or (BUILTINS[source].task if source in BUILTINS else None)
    return None if declared is None else str(declared)


def read_answers(
    task_name: str, source: str, options: Mapping[str, Any], spec: SequenceSettings
) -> AnswerData:
    """Stage `source` read as `adaptlab train --task <task_name> --data source` reads it
    with `options`: `train_size` training examples (as many dev) and at most `test_size` test
    examples, sampled with the sequence's seed, encoded in `max_length` tokens for the model's
    tokenizer. A problem is one line naming the stage."""
    task = get_task(task_name)
    assert isinstance(task, GenerativeTask)  # sft and chat are
    seed, size = spec.train.seed, spec.train_size
    try:
        settings = stage_settings(options, task.name)
        encoded = encode_data(
            task,
            source,
            settings,
            load_tokenizer(spec.model),
            spec.train.max_length,
            sample=None if size is None else (size, seed),
            test_cap=None if spec.test_size is None else (spec.test_size, seed),
        )
    except AdaptlabError as error:
        raise type(error)(f"stage {source}: {error}") from None
    metrics = tuple(dict.fromkeys((EXACT_MATCH, task.primary_metric)))
    return AnswerData(encoded, Generation.of(settings, metrics))


def stage_settings(options: Mapping[str, Any], task: str) -> GenerativeSettings:
    """A stage's generative data options, checked as `adaptlab train` checks them; those a
    sequence does not take (`NOT_IN_A_SEQUENCE`), and those `task`'s stages do not read,
    refused."""
    for option, why in NOT_IN_A_SEQUENCE.items():
        if option in options:
            raise ConfigError(f"a sequence's stage takes no {option} ({why}); drop it")
    refuse_unread_by_objective(options, task)
    return GenerativeSettings.of(options, task)


class AnswerStages:
    """An sft or chat sequence's model and encoded stages (`SequenceStages`)."""

    def __init__(
        self,
        model: nn.Module,
        tokenizer: PreTrainedTokenizerBase,
        data: Sequence[AnswerData],
        kept: KeptAdapter,
        eval_batch_size: int,
    ) -> None:
        self.model, self.tokenizer, self.data, self.kept = model, tokenizer, data, kept
        self.eval_batch_size = eval_batch_size
        self.stages = [
            TextStage(
                part.encoded.name,
                part.encoded.splits["train"].encoded,
                part.encoded.splits["dev"].encoded,
                part.encoded.splits["test"].encoded,
            )
            for part in data
        ]

    @classmethod
    def load(
        cls, task: str, spec: SequenceSettings, data: Sequence[AnswerData], device: torch.device
    ) -> AnswerStages:
        """`spec`'s model on `device` as a causal LM, for the stages of `data` (of `task`)."""
        kept = KeptAdapter(task, one_template(data))
        loaded = load_model(spec.model, "causal_lm", seed=spec.train.seed)
        model: nn.Module = loaded.model
        prepare_base(model, spec.scale, device)
        return cls(model, loaded.tokenizer, data, kept, spec.train.eval_batch_size)

    def dropped(self, stage: int) -> dict[str, int]:
        return dict(self.data[stage].encoded.dropped)

    def labels(self, stage: int) -> tuple[str, ...]:
        return ()

    def ready(self, stage: int) -> None:
        """Nothing but the adapter is the stage's own."""

    def run(self, stage: int) -> TextStageRun:
        return TextStageRun(
            self.model,
            self.stages,
            stage,
            self.eval_batch_size,
            pad_id=self.tokenizer.pad_token_id,
        )

    def test(self, stage: int) -> dict[str, float]:
        """The perplexity and token accuracy of the stage's test answers, its generated
        answers' scores (`EXACT_MATCH`, and the task's own judge), and the mean test loss."""
        part = self.data[stage]
        scored = score_split(
            self.model,
            self.tokenizer,
            part.encoded.splits["test"],
            part.generation,
            self.eval_batch_size,
        )
        return {**scored.metrics, "loss": scored.loss}


def one_template(data: Sequence[AnswerData]) -> str | None:
    """The chat template every stage was rendered with (None for pairs without one); stages
    rendered with different templates are refused, since the kept adapter serves with one."""
    templates = [part.encoded.chat_template for part in data]
    for part, template in zip(data, templates, strict=True):
        if template != templates[0]:
            raise ConfigError(
                f"stages {data[0].encoded.name} and {part.encoded.name} render chats with "
                "different chat templates; give every stage the same chat_template"
            )
    return templates[0]
