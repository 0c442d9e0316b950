"""A trained generative adapter put to use: scored on a split of a data set (`adaptlab eval`),
or answering prompts (`adaptlab predict`). Chats are rendered with the template the adapter
was trained with (its manifest's, `kept_template`), unless a template file is given."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from adaptlab.data.chat_render import ChatTemplate
from adaptlab.data.generative import Turn
from adaptlab.data.generative_encoding import GenerativeEncoder
from adaptlab.data.generative_rows import PromptColumns, read_generative
from adaptlab.models.loading import LoadedModel
from adaptlab.runs.generative_data import encode_data, prompt_encoder
from adaptlab.runs.generative_evaluation import (
    Generation,
    Scored,
    generate_answers,
    score_split,
)
from adaptlab.tasks.generation_metrics import generation_scores
from adaptlab.tasks.generative_facts import GenerativeFacts
from adaptlab.tasks.generative_settings import GenerativeSettings

SHORT_ANSWER_METRICS = ("exact_match", "token_f1", "rougeL")
"""The scores each predicted answer gets beside its reference (corpus-level BLEU and chrF mean
little for one sentence; `adaptlab eval` gives them for a split)."""


@dataclass(frozen=True)
class SplitRequest:
    """A split to score (`adaptlab eval`): `split` of `data`, read with `options`, cut to
    `max_length` tokens and scored `batch_size` at a time by `loaded`; chats rendered with
    `kept` (the template the adapter's manifest keeps) unless `options` name a file."""

    loaded: LoadedModel
    kept: ChatTemplate | None
    data: str
    options: Mapping[str, Any]
    split: str
    max_length: int
    batch_size: int


@dataclass(frozen=True)
class SplitScores:
    """A data set's split scored: its name, how many examples, the scores."""

    name: str
    examples: int
    scored: Scored


def score_trained(task: GenerativeFacts, request: SplitRequest) -> SplitScores:
    """The requested split scored by the adapter's model: perplexity of the targets and, for
    a task that generates, its answers against the references."""
    settings = GenerativeSettings.of(request.options, task.name)
    tokenizer = request.loaded.tokenizer
    encoded = encode_data(
        task, request.data, settings, tokenizer, request.max_length, template=request.kept
    )
    part = encoded.splits[request.split]
    generation = Generation.of(settings) if task.generates else None
    scored = score_split(request.loaded.model, tokenizer, part, generation, request.batch_size)
    return SplitScores(encoded.name, len(part.encoded), scored)


def prompts_of(
    task: GenerativeFacts,
    loaded: LoadedModel,
    kept: ChatTemplate | None,
    settings: GenerativeSettings,
    max_length: int,
    source: Path | Sequence[str],
) -> tuple[list[list[int]], list[str | None]]:
    """The prompts to answer, with their references: a data file's examples (read as the
    task's data, each with its answer), or lines of text, each a prompt (for a chat, a user's
    turn) without one. Chats are rendered with `kept` (the template the adapter's manifest
    keeps) unless `settings` name a file."""
    template = settings.chat_template_or(kept)
    encoder = prompt_encoder(task, loaded.tokenizer, max_length, chat_template=template)
    if isinstance(source, Path):
        shape = task.data_shape or "prompt-completion"
        columns = PromptColumns(settings.prompt_column, settings.completion_column)
        examples = [example for example, _ in read_generative(source, shape, columns)]
        return [encoder.prompt_ids(e) for e in examples], [encoder.reference(e) for e in examples]
    if task.data_shape == "messages" and isinstance(encoder, GenerativeEncoder):
        chat = encoder.chat
        prompts = [chat.ids(chat.text([Turn("user", line)], opened=True)) for line in source]
    else:
        prompts = [loaded.tokenizer(line)["input_ids"] for line in source]
    return [p[-(max_length - 1) :] for p in prompts], [None] * len(prompts)


def answer(
    loaded: LoadedModel,
    prompts: Sequence[Sequence[int]],
    references: Sequence[str | None],
    settings: GenerativeSettings,
    batch_size: int,
) -> list[dict[str, Any]]:
    """Each prompt's generation, with its reference and scores where one is given."""
    texts = generate_answers(
        loaded.model,
        loaded.tokenizer,
        prompts,
        max_new_tokens=settings.max_new_tokens,
        stop=settings.stop,
        batch_size=batch_size,
    )
    rows: list[dict[str, Any]] = []
    for prompt, text, reference in zip(prompts, texts, references, strict=True):
        row: dict[str, Any] = {"prompt": loaded.tokenizer.decode(list(prompt)), "generation": text}
        if reference is not None:
            row["reference"] = reference
            row["scores"] = generation_scores([text], [reference], SHORT_ANSWER_METRICS)
        rows.append(row)
    return rows
