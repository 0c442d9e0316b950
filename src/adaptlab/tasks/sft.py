"""`sft`: supervised fine-tuning on prompt -> completion pairs (instructions, questions), the
loss on the completion's tokens only unless `train_on_prompt`, as TRL's `SFTTrainer` does by
default for prompt-completion data. Data: `prompt` / `completion` columns (names
configurable) or the Alpaca triple `instruction` / `input` / `output`. Dev and test generate
an answer to each prompt and score it against the completion; exact match judges by default
(short answers), any generative metric by `metric`."""

from __future__ import annotations

from adaptlab.tasks.generation_metrics import GENERATION_METRICS
from adaptlab.tasks.generative import GenerativeTask
from adaptlab.tasks.generative_facts import PERPLEXITY
from adaptlab.tasks.registry import register_task


class SupervisedFineTuning(GenerativeTask):
    """A decoder taught to answer prompts."""

    name = "sft"
    summary = "prompt -> completion fine-tuning of a decoder, the loss on the completion"
    primary_metric = "exact_match"
    metrics = GENERATION_METRICS
    paired_metrics = ("exact_match", PERPLEXITY)
    data_shape = "prompt-completion"
    data_marker = "generated"
    data_options = (
        "prompt_column",
        "completion_column",
        "train_on_prompt",
        "pack",
        "max_new_tokens",
        "stop",
        "metric",
    )


SFT = register_task(SupervisedFineTuning())
