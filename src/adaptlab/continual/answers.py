"""`sft` and `chat`: a decoder-only causal LM taught to answer, stage after stage. Each stage is
a data entry of prompt -> completion pairs (`sft`) or chats (`chat`), read, sampled, capped and
encoded exactly as `adaptlab train --task sft|chat --data X` reads it; the loss is on the
answers' tokens only (the completion, the assistant's turns), the matrix holds the perplexity
of each stage's test answers (each cell also the greedy exact match of the generated
answers), and the adapter the last stage trained is kept with the sequence, with the task and
the chat template its manifest records as `adaptlab train` writes them.

The two objectives differ only by the task whose data they read, so one class serves both,
each subclass naming its task and the data it takes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from adaptlab.continual.objectives import register_objective
from adaptlab.continual.sequence_objective import (
    SequenceObjective,
    SequenceSettings,
    stage_data_options,
)
from adaptlab.errors import DataError
from adaptlab.tasks.registry import get_task

if TYPE_CHECKING:
    import torch

    from adaptlab.continual.answer_stages import AnswerData, AnswerStages


class AnswerObjective(SequenceObjective):
    """Stages of `task`'s data (an `adaptlab train` task that generates answers), scored by the
    perplexity of their test answers."""

    task: ClassVar[str]
    """The `adaptlab train` task whose data the stages are, read and encoded as it reads them."""
    takes: ClassVar[str]
    """What its stages' data is, in a few words (refusals)."""
    metric = "perplexity"
    unit = "examples"
    needs_causal_lm = True
    keeps_adapter = True
    generation_options = True

    def check_stage_task(self, source: str, task: str) -> None:
        if task != self.task:
            raise DataError(
                f"stage {source} is a {task} task; {self.name} sequences take {self.takes}"
            )

    def read_stage(
        self, source: str, options: Mapping[str, Any], spec: SequenceSettings
    ) -> AnswerData:
        from adaptlab.continual.answer_stages import declared_task, read_answers

        declared = declared_task(source, options)
        if declared is not None:
            self.check_stage_task(source, declared)
        return read_answers(self.task, source, options, spec)

    def load_stages(
        self, spec: SequenceSettings, data: Sequence[Any], device: torch.device
    ) -> AnswerStages:
        from adaptlab.continual.answer_stages import AnswerStages

        return AnswerStages.load(self.task, spec, data, device)


class SupervisedFineTuning(AnswerObjective):
    """Prompt -> completion stages."""

    name = "sft"
    task = "sft"
    data_options = stage_data_options(get_task(task))
    description = (
        "a causal LM taught to answer prompts, stage after stage: perplexity of the test "
        "completions"
    )
    takes = (
        "prompt -> completion pairs (prompt and completion columns, Alpaca triples, or a "
        "built-in pair corpus such as countries-qa)"
    )


class ChatFineTuning(AnswerObjective):
    """Chat stages."""

    name = "chat"
    task = "chat"
    data_options = stage_data_options(get_task(task))
    description = (
        "a causal LM taught to take the assistant's turns of chats, stage after stage: "
        "perplexity of the test answers"
    )
    takes = (
        "chats (a JSONL file of messages, or a built-in corpus such as friends-chat or "
        "countries-qa read as one-question chats)"
    )


SFT = register_objective(SupervisedFineTuning())
CHAT = register_objective(ChatFineTuning())
