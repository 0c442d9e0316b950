"""`adaptlab methods`: every registered method with its trainable share on a model."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from adaptlab.cli.console import console
from adaptlab.cli.options import positive
from adaptlab.errors import ConfigError
from adaptlab.methods import adapt, list_methods, remove
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
    table = Table(title=f"methods on {model}" if model else "methods")
    table.add_column("method")
    table.add_column("description")
    table.add_column("default lr", justify="right")
    if model:
        table.add_column("trainable", justify="right")
        table.add_column("share", justify="right")
        loaded = load_model(model, "single_label", num_labels=num_labels, seed=0)
    for method in list_methods():
        row = [method.name, method.description, f"{method.config_class.default_learning_rate:g}"]
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
    console().print(table)
