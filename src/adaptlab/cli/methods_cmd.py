"""`adaptlab methods`: every registered method with its trainable share on a model, and fusion."""

from __future__ import annotations

from dataclasses import fields
from typing import Annotated

import typer
from rich.table import Table

from adaptlab.cli.console import console
from adaptlab.cli.options import positive
from adaptlab.errors import ConfigError
from adaptlab.methods.adapt import adapt, remove
from adaptlab.methods.configs.fusion import FusionEntry
from adaptlab.methods.registry import Method, list_methods
from adaptlab.models.loading import load_model

HEAD_SIZE = 2
"""The classification head counted on --model unless --num-labels says otherwise."""


def methods(
    model: Annotated[
        str | None,
        typer.Option(
            help="Count trainable parameters on this model (built-in name, HF name or folder)."
        ),
    ] = None,
    num_labels: Annotated[
        int | None,
        typer.Option(
            help=f"Size of the classification head counted on --model (default {HEAD_SIZE}).",
            callback=positive,
        ),
    ] = None,
) -> None:
    """List the adaptation methods, with trainable parameters on --model.

    Example:

        adaptlab methods --model minilm-l6
    """
    if num_labels is not None and model is None:
        raise ConfigError("--num-labels sizes the head counted on --model; give --model or drop it")
    listed = list_methods()
    table = Table(title=f"methods on {model}" if model else "methods")
    for column in ("method", "description", "use"):
        table.add_column(column)
    table.add_column("default lr", justify="right")
    table.add_column("generation lr", justify="right")
    if model:
        table.add_column("trainable", justify="right")
        table.add_column("share", justify="right")
        loaded = load_model(model, "single_label", num_labels=num_labels or HEAD_SIZE, seed=0)
    for method in (entry for entry in listed if isinstance(entry, Method)):
        row = [method.name, method.description, method.supports(), _rate(method, False)]
        row.append(_rate(method, True))
        if model:
            try:
                counts = adapt(loaded.model, method.name).parameter_counts()
                remove(loaded.model)
                row += [
                    f"{counts['trainable']:,}",
                    f"{100 * counts['trainable'] / counts['total']:.3f}%",
                ]
            except ConfigError as error:
                row += ["-", str(error)]
        table.add_row(*row)
    over = Table(title="trained over adapters (--adapters RUN,RUN,...)")
    for column in ("name", "description", "options", "default lr"):
        over.add_column(column, justify="right" if column == "default lr" else "left")
    for entry in (entry for entry in listed if not isinstance(entry, Method)):
        options = ", ".join(f"{f.name}={f.default}" for f in fields(entry.config_class))
        over.add_row(entry.name, entry.description, options, _rate(entry, False))
    out = console()
    out.print(table)
    out.print(over)
    out.print(SOURCES)


SOURCES = (
    "default lr: He et al. 2021 (App. A.2) and each method's paper. generation lr: tasks that "
    "generate text (sft, chat, seq2seq), from the sweep of examples/generative-defaults.yaml "
    "(docs/generative.md), where lora also adapts every linear layer at alpha = 2r (Biderman "
    "et al. 2024) unless its options say otherwise."
)


def _rate(entry: Method | FusionEntry, generates: bool) -> str:
    """The default learning rate of a listed method or of fusion, for a task that generates
    text or one that does not."""
    return f"{entry.config_class.learning_rate_default(generates):g}"
