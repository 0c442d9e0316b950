"""The options every `adaptlab analyze` command shares, declared once: --adapter, --data,
--split, --out, --device, --model and, where the analysis shows progress, --progress.

A command takes them as one parameter, `target: AnalysisTarget`, under
`@with_analysis_options()` (`adaptlab.cli.option_group`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer

from adaptlab.cli.data_file_options import DataFileOptions
from adaptlab.cli.option_group import Command, group_options, with_option_group
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

    adapter: AdapterOption
    data: DataOption
    split: Split = "dev"
    out: Out = None
    device: Device = "auto"
    model: BaseModel = None
    progress: Progress = True

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


def with_analysis_options(*, progress: bool = True) -> Callable[[Command], Command]:
    """Give a command the analysis options in place of its `target` parameter; without
    `progress`, no --progress (the analysis shows none)."""
    options = group_options(AnalysisTarget)
    if not progress:
        del options["progress"]
    return with_option_group("target", AnalysisTarget, options)
