"""What a run checks of its options and its output before any work: `execute` makes these
checks, and a launcher makes them once before it starts the run's processes, so that a mistake
is one line before any process starts, not one from each."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from adaptlab.engine.inputs import run_inputs
from adaptlab.engine.outputs import check_run_folder
from adaptlab.engine.training_checkpoint import TrainingCheckpoint, training_checkpoint
from adaptlab.errors import ConfigError
from adaptlab.records.spec import RunSpec
from adaptlab.tasks.registry import get_task, run_task


def check_run(
    spec: RunSpec,
    out: Path | None,
    *,
    overwrite: bool,
    checkpoint_every: int | Literal["epoch"] | None,
    resume: bool,
    shard: bool,
    analysed: bool = False,
) -> TrainingCheckpoint | None:
    """Fail, before any work, unless `spec` may run as asked and write `out` (see `execute`'s
    arguments; `analysed`: an analysis follows the training); the checkpoint the run keeps
    comes back (None for none)."""
    if out is not None:
        check_run_folder(out, overwrite, run_inputs(spec))
    run_task(spec.task).check_data_options(spec.data_options)
    if spec.task is not None:
        get_task(spec.task).check_run(spec, analysed=analysed)
    if shard and (checkpoint_every is not None or resume or analysed):
        raise ConfigError("--shard does not combine with checkpoints, --resume or analyses yet")
    identity = json.loads(json.dumps(spec.to_dict()))
    return training_checkpoint(out, identity, spec.data, checkpoint_every, resume, overwrite)
