"""The data-file options, declared once for every command that reads a data set:
--text-column, --text-pair-column, --label-column, --task and, where a command splits the
data itself, --split and --time-column.

A command takes them as one parameter, `data_file: DataFileOptions = DEFAULT_DATA_FILE`, and
`@with_data_file_options()` puts the options in its place on the command line
(`adaptlab.cli.option_group`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any

import typer

from adaptlab.cli.option_group import Command, group_options, with_option_group
from adaptlab.tasks.registry import TASKS

TextColumn = Annotated[str, typer.Option(help="Column holding the text (files).")]
TextPairColumn = Annotated[str | None, typer.Option(help="Column holding a second text (files).")]
LabelColumn = Annotated[str, typer.Option(help="Column holding the label (files).")]
Task = Annotated[
    str | None,
    typer.Option(
        help=f"The task: {', '.join(TASKS.listed())} (guessed from the labels when omitted; "
        "mlm: masked-language modelling on the text alone, a language adapter)."
    ),
]
SplitStrategy = Annotated[
    str,
    typer.Option(
        help="random (given splits, else 80/10/10 stratified) or chronological (earliest 80% "
        "train, next 10% dev, latest 10% test, by --time-column)."
    ),
]
TimeColumn = Annotated[
    str | None, typer.Option(help="Column dating each row, for --split chronological (files).")
]

_SPLIT_OPTIONS = ("split", "time_column")
_GROUP_PARAMETER = "data_file"


@dataclass(frozen=True)
class DataFileOptions:
    """How a data file is read (its columns and task) and, for commands that split the data
    themselves, how it is split; the defaults are the options' defaults."""

    text_column: TextColumn = "text"
    text_pair_column: TextPairColumn = None
    label_column: LabelColumn = "label"
    task: Task = None
    split: SplitStrategy = "random"
    time_column: TimeColumn = None

    def load_options(self) -> dict[str, Any]:
        """The options as `load_dataset` keywords, defaults left out (so a run's recorded
        data options name only what was asked for)."""
        options: dict[str, Any] = {}
        if self.text_column != "text":
            options["text_column"] = self.text_column
        if self.text_pair_column:
            options["text_pair_column"] = self.text_pair_column
        if self.label_column != "label":
            options["label_column"] = self.label_column
        if self.task:
            options["task"] = self.task
        if self.split != "random":
            options["split"] = self.split
        if self.time_column:
            options["time_column"] = self.time_column
        return options


DEFAULT_DATA_FILE = DataFileOptions()
"""Every option at its default: the `data_file` parameter's default in a command."""


def with_data_file_options(*, split: bool = False) -> Callable[[Command], Command]:
    """Give a command the data-file options in place of its `data_file` parameter; with
    `split`, also --split and --time-column."""
    options = group_options(DataFileOptions)
    if not split:
        options = {name: each for name, each in options.items() if name not in _SPLIT_OPTIONS}
    return with_option_group(_GROUP_PARAMETER, DataFileOptions, options)
