"""`adaptlab predict`: label raw texts, one line per input."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from adaptlab.cli.generation_options import (
    DEFAULT_GENERATION,
    GenerationOptions,
    with_generation_options,
)
from adaptlab.cli.options import BaseModel, Device, Head, MaxLength, positive
from adaptlab.data.encoding import TextEncoder
from adaptlab.data.generative_rows import EXTENSIONS
from adaptlab.data.readers import decode_utf8, read_bytes
from adaptlab.engine.restore import load_trained
from adaptlab.errors import DataError
from adaptlab.methods.manifest import adapter_folder
from adaptlab.methods.persistence import read_manifest
from adaptlab.paths import input_file
from adaptlab.tasks.generative import GenerativeTask
from adaptlab.tasks.generative_settings import GenerativeSettings
from adaptlab.tasks.generative_trained import answer, prompts_of
from adaptlab.tasks.predict import predict as run_prediction
from adaptlab.tasks.registry import get_task


@with_generation_options()
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
    named = read_manifest(adapter_folder(adapter)).get("task")
    task = get_task(named) if named else None
    if isinstance(task, GenerativeTask):
        settings = GenerativeSettings.of(generation.load_options(), task.name)
        loaded, manifest = load_trained(adapter, device, model=model, head=head)
        prompts, references = prompts_of(task, loaded, manifest, settings, max_length, source)
        for row in answer(loaded, prompts, references, settings, batch_size):
            print(json.dumps(row) if jsonl else row["generation"])
        return
    generation.refuse_for(named or "classification")
    texts = source if isinstance(source, list) else _non_empty(input)
    loaded, manifest = load_trained(adapter, device, model=model, head=head)
    name, labels = manifest["task"], manifest.get("label_names") or []
    encoder = TextEncoder(loaded.tokenizer, name, len(labels), max_length)
    for result in run_prediction(loaded.model, encoder, texts, name, labels, batch_size):
        if jsonl:
            print(json.dumps(result.to_dict()))
        elif result.words is not None:
            print(" ".join(f"{w}/{t}" for w, t in zip(result.words, result.label, strict=True)))
        elif isinstance(result.probability, float):
            print(f"{result.label}\t{result.probability:.4f}\t{result.text}")
        else:
            print(f"{result.label}\t{result.text}")


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
