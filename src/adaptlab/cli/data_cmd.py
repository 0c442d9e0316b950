"""`adaptlab data`: look at built-in corpora and data files before training on them."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table
from rich.text import Text

from adaptlab.cli.console import console
from adaptlab.cli.data_file_options import (
    DEFAULT_DATA_FILE,
    DataFileOptions,
    with_data_file_options,
)
from adaptlab.data.builtin import builtin_datasets
from adaptlab.data.describe import describe
from adaptlab.data.loading import load_dataset

app = typer.Typer(help="Inspect data sets.", no_args_is_help=True)


@app.command("list")
def list_builtin() -> None:
    """List the built-in offline corpora.

    Example:

        adaptlab data list
    """
    table = Table(title="built-in data sets")
    table.add_column("name")
    table.add_column("description")
    for name, description in builtin_datasets().items():
        table.add_row(name, description)
    console().print(table)


@app.command("show")
@with_data_file_options(split=True)
def show(
    source: Annotated[str, typer.Argument(help="Built-in name, data file or folder, or hf:NAME.")],
    data_file: DataFileOptions = DEFAULT_DATA_FILE,
) -> None:
    """Show a data set's splits, sizes, label counts and two examples.

    Example:

        adaptlab data show rotten-tomatoes

        adaptlab data show comments.csv --split chronological --time-column date
    """
    dataset = load_dataset(source, **data_file.load_options())
    info = describe(dataset)
    out = console()
    out.print(Text.assemble((dataset.name, "bold"), f" ({dataset.task}): {dataset.description}"))
    splits = info["splits"]
    table = Table()  # one column per split, one row per label: any number of labels fits
    table.add_column("")
    for split in splits:
        table.add_column(split, justify="right")
    table.add_row("examples", *(f"{summary['size']:,}" for summary in splits.values()))
    for label in next(iter(splits.values()))["labels"]:
        values = [summary["labels"].get(label, 0) for summary in splits.values()]
        table.add_row(label, *(f"{v:,}" if isinstance(v, int) else f"{v:.3g}" for v in values))
    out.print(table)
    for example in info["examples"]:
        out.print(example, highlight=False)
