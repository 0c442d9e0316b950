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
from adaptlab.methods.adapter_kind import trained_as
from adaptlab.methods.manifest import adapter_folder
from adaptlab.records.spec import RunSpec
from adaptlab.tasks.adapter_manifest import read_adapter_manifest
from adaptlab.tasks.registry import TASKS, get_task, run_task
from adaptlab.tasks.unread_options import described, refuse_unread_by_task


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
    check_data_options(spec)
    check_frozen_adapters(spec)
    if spec.task is not None:
        get_task(spec.task).check_run(spec, analysed=analysed)
    if shard and (checkpoint_every is not None or resume or analysed):
        raise ConfigError("--shard does not combine with checkpoints, --resume or analyses yet")
    identity = json.loads(json.dumps(spec.to_dict()))
    return training_checkpoint(out, identity, spec.data, checkpoint_every, resume, overwrite)


def check_data_options(spec: RunSpec) -> None:
    """Refuse a data option the run's task does not read, naming the tasks that read it (a
    run whose task its data's labels decide reads the labelled tasks' options)."""
    task = run_task(spec.task)
    this = None if spec.task is not None else "a labelled run (no --task)"
    for options in (spec.data_options, *(each.data_options for each in spec.multi_task)):
        refuse_unread_by_task(options, task, "run", this=this)


def check_frozen_adapters(spec: RunSpec) -> None:
    """Refuse a stacked or fused adapter trained as another class of model than the run's
    (combine's rule and answer, `adaptlab.methods.adapter_kind`: the class its manifest
    records), unless it is a language adapter (its task learns plain documents), which an
    adapter of any task may build on."""
    task = run_task(spec.task)
    kinds = {task.model_kind} if spec.task else {each.model_kind for each in TASKS if each.labelled}
    run = f"this {spec.task} run" if spec.task else "this labelled run"
    for option, folders in (("--stack", spec.stack), ("--adapters", spec.fuse)):
        for folder in folders:
            manifest = read_adapter_manifest(adapter_folder(folder))
            frozen = get_task(manifest.task) if manifest.task else None
            if frozen is None or frozen.plain_text:
                continue
            if not any(trained_as(manifest, kind) for kind in kinds):
                language = ", ".join(TASKS.names(lambda each: each.plain_text))
                raise ConfigError(
                    f"{option} {folder} is {described(frozen.name, 'adapter')}, trained as a "
                    f"{manifest.base_model.model_class}; {run} trains a "
                    f"{' or '.join(sorted(kinds))} model: build on adapters of that class of "
                    f"model, or on language adapters ({language})"
                )
