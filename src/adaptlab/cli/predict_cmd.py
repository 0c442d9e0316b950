"""`adaptlab predict`: label raw texts, one line per input."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import typer

from adaptlab.cli.adapter_task import ADAPTER, adapter_task
from adaptlab.cli.generation_options import (
    DEFAULT_GENERATION,
    GenerationOptions,
    with_generation_options,
)
from adaptlab.cli.options import BaseModel, Device, Head, MaxLength, positive
from adaptlab.data.chat_render import kept_template
from adaptlab.data.encoding import TextEncoder
from adaptlab.data.readers import decode_utf8, read_bytes
from adaptlab.data.record_files import EXTENSIONS
from adaptlab.engine.restore import load_trained
from adaptlab.errors import ConfigError, DataError
from adaptlab.paths import input_file
from adaptlab.runs.generative_trained import answer, prompts_of
from adaptlab.runs.predict import predict as run_prediction
from adaptlab.tasks.generative import GenerativeTask
from adaptlab.tasks.generative_settings import GenerativeSettings
from adaptlab.tasks.registry import TASKS, get_task
from adaptlab.tasks.task import Task
from adaptlab.tasks.unread_options import described, flag, refuse_unread

PREDICT_GENERATION = (
    "prompt_column",
    "completion_column",
    "chat_template",
    "max_new_tokens",
    "stop",
)
"""The generative options predicting reads (not --train-on-prompt, --pack or --metric: nothing
trains or is judged)."""
GENERATED = ("max_new_tokens", "stop")
"""How answers are generated, read for every generative adapter."""
COLUMNS = ("prompt_column", "completion_column")
"""The columns of a data-file input."""


@with_generation_options(PREDICT_GENERATION)
def predict(
    adapter: Annotated[
        Path, typer.Option(help="Adapter folder, or a run folder holding adapter/.")
    ],
    input: Annotated[
        str, typer.Option("--input", help="Text file, one input per line; - for stdin.")
    ],
    jsonl: Annotated[bool, typer.Option("--jsonl", help="One JSON object per line.")] = False,
    generation: GenerationOptions = DEFAULT_GENERATION,
    batch_size: Annotated[int, typer.Option(help="Prediction batch size.", callback=positive)] = 64,
    max_length: MaxLength = 128,
    device: Device = "auto",
    model: BaseModel = None,
    head: Head = None,
) -> None:
    """Predict a label and its probability for every line of a file (or stdin); for an adapter
    of a generative task, generate an answer to every line (a prompt, or a user's turn), or to
    every example of a data file (.jsonl, .csv, .tsv: prompt, generation, reference, scores).

    Example:

        adaptlab predict --adapter runs/rt-houlsby --input reviews.txt
        echo "a gorgeous, witty film" | adaptlab predict --adapter runs/rt-houlsby --input - --jsonl
        adaptlab predict --adapter runs/qa-lora --input questions.jsonl --max-new-tokens 16
    """
    source = _inputs(input)  # the inputs are checked before the adapter is read
    task = adapter_task(adapter, head)
    given = generation.load_options()
    if task is not None:  # else loading says the manifest names none
        readers = {each.name: _reads(each) for each in TASKS}
        refuse_unread(given, _reads(task), readers, ADAPTER, described(task.name, ADAPTER))
    if not isinstance(source, Path):
        _refuse_columns(given, input)
    if isinstance(task, GenerativeTask):
        settings = GenerativeSettings.of(given, task.name)
        loaded, manifest = load_trained(adapter, device, model=model, head=head)
        kept = kept_template(manifest, adapter)
        prompts, references = prompts_of(task, loaded, kept, settings, max_length, source)
        for row in answer(loaded, prompts, references, settings, batch_size):
            print(json.dumps(row) if jsonl else row["generation"])
        return
    texts = source if isinstance(source, list) else _non_empty(input)
    loaded, manifest = load_trained(adapter, device, model=model, head=head)
    name, labels = manifest["task"], manifest.get("label_names") or []
    encoder = TextEncoder(loaded.tokenizer, get_task(name), len(labels), max_length)
    for result in run_prediction(loaded.model, encoder, texts, name, labels, batch_size):
        if jsonl:
            print(json.dumps(result.to_dict()))
        elif result.score is not None:  # a reward model's score
            print(f"{result.score:.4f}\t{result.text}")
        elif result.words is not None:
            print(" ".join(f"{w}/{t}" for w, t in zip(result.words, result.label, strict=True)))
        elif isinstance(result.probability, float):
            print(f"{result.label}\t{result.probability:.4f}\t{result.text}")
        else:
            print(f"{result.label}\t{result.text}")


def _reads(task: Task) -> tuple[str, ...]:
    """The generative options predicting with an adapter of `task` reads: those of its task
    predicting takes, and how answers are generated (every generative adapter answers)."""
    if not isinstance(task, GenerativeTask):
        return ()
    return tuple(o for o in PREDICT_GENERATION if o in task.data_options or o in GENERATED)


def _refuse_columns(given: Mapping[str, Any], input: str) -> None:
    """Refuse the column options for an --input of lines, which has no columns."""
    for option in COLUMNS:
        if option in given:
            raise ConfigError(
                f"{flag(option)} is for data-file inputs ({', '.join(EXTENSIONS)}); --input "
                f"{input} is read a prompt a line"
            )


def _inputs(source: str) -> Path | list[str]:
    """A data file's path (.jsonl, .csv, .tsv: a generative adapter answers its examples,
    with their references), or the non-empty lines of a text file or stdin."""
    path = Path(source)
    if source != "-" and path.suffix.lower() in EXTENSIONS:
        return input_file(path, "--input")
    return _non_empty(source)


def _non_empty(source: str) -> list[str]:
    """The non-empty lines of `source` (a file, or - for stdin); none is one line."""
    texts = [line.rstrip("\n") for line in _read_lines(source)]
    texts = [t for t in texts if t.strip()]
    if not texts:
        raise DataError(f"{source}: no non-empty lines to predict")
    return texts


def _read_lines(source: str) -> list[str]:
    if source == "-":
        return sys.stdin.readlines()
    path = input_file(Path(source), "--input")
    return decode_utf8(read_bytes(path), path).splitlines()
