"""`adaptlab data pairs`: preference pairs from a trained model's own wrong answers, written as
a JSON Lines file `train --task dpo` reads (`adaptlab.runs.own_pairs`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from adaptlab.cli.console import console
from adaptlab.cli.generation_options import MaxNewTokens, Stop
from adaptlab.cli.options import BaseModel, Device, MaxLength, data_source, positive
from adaptlab.errors import ConfigError
from adaptlab.paths import check_output_file, existing

DEFAULT_NEW_TOKENS = 32
"""Tokens an answer may take (short answers, as exact match judges them)."""


def pairs(
    adapter: Annotated[
        Path,
        typer.Option(
            help="Adapter folder (or run folder) of a generative task, whose answers are paired."
        ),
    ],
    data: Annotated[
        str,
        typer.Option(
            help="Questions with reference answers: countries-qa-questions, arithmetic, or a "
            "JSONL / CSV / TSV file or folder with prompt and answer columns.",
            callback=data_source,
        ),
    ],
    out: Annotated[Path, typer.Option(help="The pairs' JSON Lines file (a new file).")],
    split: Annotated[str, typer.Option(help="The split whose questions are answered.")] = "train",
    prompt_column: Annotated[str, typer.Option(help="Column holding the prompt.")] = "prompt",
    answer_column: Annotated[
        str, typer.Option(help="Column holding the reference answer.")
    ] = "answer",
    max_new_tokens: MaxNewTokens = DEFAULT_NEW_TOKENS,
    stop: Stop = None,
    batch_size: Annotated[
        int, typer.Option(help="Questions answered at once.", callback=positive)
    ] = 64,
    max_length: MaxLength = 128,
    device: Device = "auto",
    model: BaseModel = None,
) -> None:
    """Answer a split's questions with a trained adapter and write a preference pair for each
    wrong answer: the reference chosen, the model's own answer rejected (exact match decides
    what is wrong). DPO on these pairs corrects the model where it errs.

    Example:

        adaptlab data pairs --adapter runs/qa-sft --data countries-qa-questions \\
            --out own-pairs.jsonl --max-new-tokens 12 --stop "\\n"
        adaptlab train --model smollm2-135m --data own-pairs.jsonl --task dpo \\
            --stack runs/qa-sft --out runs/qa-dpo-own
    """
    from adaptlab.cli.adapter_task import adapter_task
    from adaptlab.data.chat_render import kept_template
    from adaptlab.data.preference import Question
    from adaptlab.data.preference_loading import load_preferences
    from adaptlab.data.preference_writing import write_preferences
    from adaptlab.engine.restore import check_split, load_trained
    from adaptlab.runs.own_pairs import own_answer_pairs
    from adaptlab.tasks.generative import GenerativeTask
    from adaptlab.tasks.registry import LABELLED

    check_split(split)
    inputs = existing([(adapter, "adapter"), (data, "data")])
    check_output_file(out, "pairs file", replaceable=lambda _: False, inputs=inputs)
    task = adapter_task(adapter, None)
    if task is not None and not isinstance(task, GenerativeTask):
        raise ConfigError(
            f"--adapter {adapter} is a {task.name} adapter, which does not write answers; give "
            "an adapter of a generative task (sft, chat, dpo, grpo...)"
        )
    corpus = load_preferences(
        data,
        LABELLED,
        shape="prompt-only",
        prompt_column=prompt_column,
        answer_column=answer_column,
    )
    questions = [q for q in corpus.splits[split] if isinstance(q, Question)]
    if not questions:
        raise ConfigError(f"the {split} split of {corpus.name} has no question")
    if any(q.answer is None for q in questions):
        raise ConfigError(
            f"{corpus.name} has questions without a reference answer; a pair needs the right "
            f"answer to prefer (add an '{answer_column}' column)"
        )
    loaded, manifest = load_trained(adapter, device, model=model)
    made = own_answer_pairs(
        loaded.model.eval(),
        loaded.tokenizer,
        questions,
        max_length=max_length,
        chat_template=kept_template(manifest, adapter),
        max_new_tokens=max_new_tokens,
        stop=tuple(stop or ()),
        batch_size=batch_size,
    )
    write_preferences(out, made)
    console().print(
        f"{len(made)} of {len(questions)} answers wrong: {len(made)} pairs written to {out}"
    )
