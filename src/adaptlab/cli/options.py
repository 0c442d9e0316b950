"""Options shared by several commands."""

from __future__ import annotations

from typing import Annotated, Any

import typer

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
    typer.Option(
        help="single_label, multi_label, token or regression (inferred when omitted); "
        "mlm: masked-language modelling on the text alone (a language adapter)."
    ),
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
