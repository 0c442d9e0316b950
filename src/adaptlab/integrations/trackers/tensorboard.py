"""TensorBoard: a run's scalars as event files in its own folder (`tensorboard --logdir` on the
folder above compares runs).

The writer is torch's `torch.utils.tensorboard.SummaryWriter`, as transformers' own TensorBoard
callback uses: torch is loaded wherever a run trains, and its writer queues each event for a
background thread, so a step costs one small protobuf and no file write. (TensorBoard's own
TF-free writer is internal to that package.)
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from adaptlab.integrations.trackers.reporter import Status

EVENTS = "events.out.tfevents.*"


class TensorBoardSink:
    """One run's event files in `folder` from step `first`; the run's spec as the text `spec`.

    A run starting at step 1 first removes the event files an earlier try of it left there, so
    its curves are not drawn twice; a resumed run keeps them and has TensorBoard hide their
    steps from `first` on (`purge_step`: those the stopped try trained past its checkpoint)."""

    def __init__(self, folder: Path, spec: Mapping[str, Any], first: int = 1) -> None:
        from torch.utils.tensorboard import SummaryWriter

        if first <= 1:
            for earlier in folder.glob(EVENTS):
                earlier.unlink()
        self._writer = SummaryWriter(str(folder), purge_step=first if first > 1 else None)
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
