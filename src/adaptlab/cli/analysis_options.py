"""The options every `adaptlab analyze` command shares, declared once: --adapter, --data,
--split, --out, --device, --model and, where the analysis shows progress, --progress.

A command takes them as one parameter, `target: AnalysisTarget`, under
`@with_analysis_options()` (`adaptlab.cli.option_group`).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import MISSING, Field, dataclass, fields
from pathlib import Path
from typing import Annotated, Any

import typer

from adaptlab.cli.data_file_options import DataFileOptions
from adaptlab.cli.option_group import Command, with_option_group
from adaptlab.cli.options import BaseModel, DataOption, Device

AdapterOption = Annotated[
    Path, typer.Option(help="Run folder (or adapter folder) of a trained model.")
]
Split = Annotated[str, typer.Option(help="train, dev or test; a run folder's own split.")]
Out = Annotated[
    Path | None,
    typer.Option(help="Folder for the JSON and PNG; default: <adapter>/analysis."),
]
Progress = Annotated[bool, typer.Option(help="Show progress bars.")]


@dataclass(frozen=True)
class AnalysisTarget:
    """The trained model an analysis looks at, the data it reads, where it runs and where it
    writes; the defaults are the options' defaults."""

    adapter: Path
    data: str
    split: str = "dev"
    out: Path | None = None
    device: str = "auto"
    model: str | None = None
    progress: bool = True

    def keywords(self, data_file: DataFileOptions) -> dict[str, Any]:
        """What every analysis function (`adaptlab.analysis.api`) takes from these options,
        with how `data_file` is read."""
        return {
            "path": self.adapter,
            "data": self.data,
            "split": self.split,
            "data_options": data_file.load_options(),
            "out": self.out,
            "device": self.device,
            "model": self.model,
        }


_OPTION_TYPES = {
    "adapter": AdapterOption,
    "data": DataOption,
    "split": Split,
    "out": Out,
    "device": Device,
    "model": BaseModel,
    "progress": Progress,
}


def _default(field: Field[object]) -> object:
    """The option's default: the field's, or none (the option is required)."""
    return inspect.Parameter.empty if field.default is MISSING else field.default


def with_analysis_options(*, progress: bool = True) -> Callable[[Command], Command]:
    """Give a command the analysis options in place of its `target` parameter; without
    `progress`, no --progress (the analysis shows none)."""
    options = {
        field.name: (_OPTION_TYPES[field.name], _default(field))
        for field in fields(AnalysisTarget)
        if progress or field.name != "progress"
    }
    return with_option_group("target", AnalysisTarget, options)
