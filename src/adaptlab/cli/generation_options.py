"""The options of the generative tasks (`--task causal-lm|sft|chat`), declared once for the
commands that train or score them: the prompt and completion columns, whether the prompt
trains, the chat template, packing, and how answers are generated (new tokens, stop strings)
and judged. They join the run's data options (`adaptlab.tasks.generative_settings` checks
them), defaults left out, so a classification run's options and id are unchanged. A command
offers those it reads; one its task does not read is refused (`adaptlab.tasks.unread_options`)."""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Annotated, Any

import typer

from adaptlab.cli.option_group import Command, group_options, with_option_group
from adaptlab.tasks.generative_settings import DEFAULT_NEW_TOKENS

PromptColumn = Annotated[str, typer.Option(help="Column holding the prompt (sft files).")]
CompletionColumn = Annotated[str, typer.Option(help="Column holding the completion (sft files).")]
TrainOnPrompt = Annotated[
    bool,
    typer.Option(
        help="Put the prompt's (or the user's turns') tokens in the loss too; by default only "
        "the completion or the assistant's turns train."
    ),
]
ChatTemplate = Annotated[
    Path | None,
    typer.Option(
        help="A Jinja chat template file, for a tokenizer without one (chat); it is kept in "
        "the adapter's manifest."
    ),
]
Pack = Annotated[
    bool,
    typer.Option(
        help="Pack several examples into each row of --max-length tokens, none attending to "
        "another (fewer pad tokens, the same loss)."
    ),
]
MaxNewTokens = Annotated[
    int, typer.Option(help="Tokens generated per dev and test prompt (sft, chat, seq2seq).")
]
Stop = Annotated[
    list[str] | None,
    typer.Option(help="Stop generating at this text (repeat for several; at most 4)."),
]
GenerationMetric = Annotated[
    str | None,
    typer.Option(
        help="The dev metric that picks the best epoch: perplexity, or exact_match, token_f1, "
        "rouge1, rouge2, rougeL, bleu, chrf for sft, chat and seq2seq (default: the task's own)."
    ),
]


@dataclass(frozen=True)
class GenerationOptions:
    """The generative options as given; the defaults are the options' defaults."""

    prompt_column: PromptColumn = "prompt"
    completion_column: CompletionColumn = "completion"
    train_on_prompt: TrainOnPrompt = False
    chat_template: ChatTemplate = None
    pack: Pack = False
    max_new_tokens: MaxNewTokens = DEFAULT_NEW_TOKENS
    stop: Stop = None
    metric: GenerationMetric = None

    def load_options(self) -> dict[str, Any]:
        """The options that differ from their defaults, as data options (the chat template
        as an absolute path, so a run can be repeated from anywhere)."""
        options: dict[str, Any] = {}
        for each in fields(self):
            value = getattr(self, each.name)
            if value != each.default and value not in (None, []):
                options[each.name] = value
        if self.chat_template is not None:
            options["chat_template"] = str(self.chat_template.resolve())
        if self.stop:
            options["stop"] = list(self.stop)
        return options


DEFAULT_GENERATION = GenerationOptions()
"""Every option at its default: the `generation` parameter's default in a command."""


def with_generation_options(names: Collection[str] | None = None) -> Callable[[Command], Command]:
    """Give a command the generative options `names` (default: all) in place of its
    `generation` parameter; a command offers only those it reads, the others keep their
    defaults."""
    options = group_options(GenerationOptions, names)
    return with_option_group("generation", GenerationOptions, options)
