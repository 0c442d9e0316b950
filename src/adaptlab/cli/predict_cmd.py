"""`adaptlab predict`: label raw texts, one line per input."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from adaptlab.cli.options import BaseModel, Device, MaxLength, positive
from adaptlab.data.encoding import TextEncoder
from adaptlab.data.readers import decode_utf8, read_bytes
from adaptlab.engine.restore import load_trained
from adaptlab.errors import DataError
from adaptlab.paths import input_file
from adaptlab.tasks.predict import predict as run_prediction


def predict(
    adapter: Annotated[
        Path, typer.Option(help="Adapter folder, or a run folder holding adapter/.")
    ],
    input: Annotated[
        str, typer.Option("--input", help="Text file, one input per line; - for stdin.")
    ],
    jsonl: Annotated[bool, typer.Option("--jsonl", help="One JSON object per line.")] = False,
    batch_size: Annotated[int, typer.Option(help="Prediction batch size.", callback=positive)] = 64,
    max_length: MaxLength = 128,
    device: Device = "auto",
    model: BaseModel = None,
) -> None:
    """Predict a label and its probability for every line of a file (or stdin).

    Example:

        adaptlab predict --adapter runs/rt-houlsby --input reviews.txt
        echo "a gorgeous, witty film" | adaptlab predict --adapter runs/rt-houlsby --input - --jsonl
    """
    texts = [line.rstrip("\n") for line in _read_lines(input)]
    texts = [t for t in texts if t.strip()]
    if not texts:
        raise DataError(f"{input}: no non-empty lines to predict")
    loaded, manifest = load_trained(adapter, device, model=model)
    task, labels = manifest["task"], manifest.get("label_names") or []
    encoder = TextEncoder(loaded.tokenizer, task, len(labels), max_length)
    for result in run_prediction(loaded.model, encoder, texts, task, labels, batch_size):
        if jsonl:
            print(json.dumps(result.to_dict()))
        elif result.words is not None:
            print(" ".join(f"{w}/{t}" for w, t in zip(result.words, result.label, strict=True)))
        elif isinstance(result.probability, float):
            print(f"{result.label}\t{result.probability:.4f}\t{result.text}")
        else:
            print(f"{result.label}\t{result.text}")


def _read_lines(source: str) -> list[str]:
    if source == "-":
        return sys.stdin.readlines()
    path = input_file(Path(source), "--input")
    return decode_utf8(read_bytes(path), path).splitlines()
