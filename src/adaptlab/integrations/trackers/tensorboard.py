"""TensorBoard: a run's scalars as event files in its own folder (`tensorboard --logdir` on the
folder above compares runs).

The writer is torch's `torch.utils.tensorboard.SummaryWriter`, as transformers' own TensorBoard
callback uses: torch is loaded wherever a run trains, and its writer queues each event for a
background thread, so a step costs one small protobuf and no file write. (TensorBoard's own
TF-free writer is internal to that package.)

adaptlab's event files end in `.adaptlab` (TensorBoard reads any file with `tfevents` in its
name), so a run replaces only event files adaptlab wrote; a folder holding another writer's
is refused before the run trains (`foreign_events`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from adaptlab.errors import ConfigError
from adaptlab.integrations.trackers.reporter import Status

EVENTS_MARK = ".adaptlab"
"""The ending of every event file adaptlab writes."""
EVENTS = "*tfevents*"
"""Event files, whoever wrote them (what TensorBoard reads)."""


def foreign_events(folder: Path) -> list[str]:
    """The names of the event files in `folder` that adaptlab did not write."""
    if not folder.is_dir():
        return []
    return sorted(path.name for path in folder.glob(EVENTS) if not _own(path))


class TensorBoardSink:
    """One run's event files in `folder` from step `first`; the run's spec as the text `spec`.

    A run starting at step 1 first removes the event files an earlier try of it left there, so
    its curves are not drawn twice; a resumed run keeps them and has TensorBoard hide their
    steps from `first` on (`purge_step`: those the stopped try trained past its checkpoint)."""

    def __init__(self, folder: Path, spec: Mapping[str, Any], first: int = 1) -> None:
        from torch.utils.tensorboard import SummaryWriter

        try:
            if first <= 1:
                for earlier in folder.glob(EVENTS):
                    if _own(earlier):
                        earlier.unlink()
            self._writer = SummaryWriter(
                str(folder), purge_step=first if first > 1 else None, filename_suffix=EVENTS_MARK
            )
        except OSError as error:
            reason = (error.strerror or type(error).__name__).lower()
            raise ConfigError(f"cannot write TensorBoard events to {folder} ({reason})") from None
        text = json.dumps(spec, indent=2).replace("\n", "\n    ")
        self._writer.add_text("spec", f"    {text}")  # indented: shown as a code block

    def scalars(self, values: Mapping[str, float], step: int) -> None:
        for name, value in values.items():
            self._writer.add_scalar(name, value, step)

    def flush(self) -> None:
        self._writer.flush()

    def close(self, status: Status, artifact: Path | None) -> None:
        self._writer.add_text("status", status)
        self._writer.close()


def _own(path: Path) -> bool:
    """Whether `path` is an event file adaptlab wrote (a plain file with adaptlab's ending)."""
    return path.name.endswith(EVENTS_MARK) and path.is_file() and not path.is_symlink()
