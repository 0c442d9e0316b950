"""Options shared by several commands, and the checks that run on options as they are parsed
(so a bad number fails in one line before any model or data loads)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from adaptlab import checks

DataOption = Annotated[
    str,
    typer.Option(
        "--data",
        help="Built-in corpus (rotten-tomatoes, 20newsgroups, reuters-r8, twitter-sentiment, "
        "wnut16-ner, slovenian-opinions), a CSV / TSV / JSONL / BIO file or folder, or hf:NAME.",
    ),
]
TextColumn = Annotated[str, typer.Option(help="Column holding the text (files).")]
TextPairColumn = Annotated[str | None, typer.Option(help="Column holding a second text (files).")]
LabelColumn = Annotated[str, typer.Option(help="Column holding the label (files).")]
Task = Annotated[
    str | None,
    typer.Option(help="single_label, multi_label, token or regression; inferred when omitted."),
]
Device = Annotated[str, typer.Option(help="cpu, cuda or cuda:N.")]
BaseModel = Annotated[
    str | None,
    typer.Option(
        "--model",
        help="Base model to load the adapter onto; default: the built-in or hub model its "
        "manifest names (a local folder must be given here).",
    ),
]


def _flag(param: typer.CallbackParam) -> str:
    """The option as the user typed it: `--batch-size`."""
    return max(param.opts, key=len) if param.opts else str(param.name)


def positive(param: typer.CallbackParam, value: int | None) -> int | None:
    """Option callback: a count of at least 1 (None passes: the option was left out)."""
    return None if value is None else checks.positive(value, _flag(param))


def at_least_two(param: typer.CallbackParam, value: int | None) -> int | None:
    """Option callback: an integer of at least 2 (token lengths, points, token samples)."""
    return None if value is None else checks.at_least(value, 2, _flag(param))


def non_negative(param: typer.CallbackParam, value: int | None) -> int | None:
    """Option callback: an integer of at least 0."""
    return None if value is None else checks.at_least(value, 0, _flag(param))


def seed(param: typer.CallbackParam, value: int | None) -> int | None:
    """Option callback: a seed in 0 .. 2**32 - 1."""
    return None if value is None else checks.seed(value, _flag(param))


def positive_finite(param: typer.CallbackParam, value: float | None) -> float | None:
    """Option callback: a finite number > 0 (not NaN, not infinite)."""
    return None if value is None else checks.positive_finite(value, _flag(param))


MaxLength = Annotated[
    int, typer.Option(help="Truncate inputs to this many tokens.", callback=at_least_two)
]


def data_options(
    text_column: str, text_pair_column: str | None, label_column: str, task: str | None
) -> dict[str, Any]:
    """The data-file options as `load_dataset` keywords, leaving defaults out."""
    options: dict[str, Any] = {}
    if text_column != "text":
        options["text_column"] = text_column
    if text_pair_column:
        options["text_pair_column"] = text_pair_column
    if label_column != "label":
        options["label_column"] = label_column
    if task:
        options["task"] = task
    return options
