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


def methods(
    model: Annotated[
        str | None,
        typer.Option(
            help="Count trainable parameters on this model (built-in name, HF name or folder)."
        ),
    ] = None,
    num_labels: Annotated[
        int, typer.Option(help="Size of the classification head counted.", callback=positive)
    ] = 2,
) -> None:
    """List the adaptation methods, with trainable parameters on --model.

    Example:

        adaptlab methods --model minilm-l6
    """
    listed = list_methods()
    table = Table(title=f"methods on {model}" if model else "methods")
    for column in ("method", "description", "use"):
        table.add_column(column)
    table.add_column("default lr", justify="right")
    if model:
        table.add_column("trainable", justify="right")
        table.add_column("share", justify="right")
        loaded = load_model(model, "single_label", num_labels=num_labels, seed=0)
    for method in (entry for entry in listed if isinstance(entry, Method)):
        row = [method.name, method.description, method.supports(), _rate(method)]
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
        over.add_row(entry.name, entry.description, options, _rate(entry))
    out = console()
    out.print(table)
    out.print(over)


def _rate(entry: Method | FusionEntry) -> str:
    """The default learning rate of a listed method or of fusion."""
    return f"{entry.config_class.default_learning_rate:g}"
