"""One training run end to end: data, model, method, training, test, and its files.

`execute` is what `adaptlab train` and every study run call, whatever the task: the task's
objective (`adaptlab.engine.run_objective`) reads the data and prepares the model, the one
epoch loop (`adaptlab.engine.loop`) trains it at the spec's scale, the objective scores the
test, and an analysis sees the trained model, both at the run's precision. It validates
everything it can before any long work, and writes its folder atomically
(`adaptlab.engine.run_folder`).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import time
from dataclasses import replace
from pathlib import Path
from typing import Literal

import torch

from adaptlab.engine.inputs import run_inputs
from adaptlab.engine.loop import train_epochs
from adaptlab.engine.memory import peak_memory_bytes, reset_peak_memory
from adaptlab.engine.objective import updates_per_batch
from adaptlab.engine.outputs import ADAPTER_FOLDER, LOG_FILE, METRICS_FILE
from adaptlab.engine.precision import autocast_at, keep_trained_in_float32
from adaptlab.engine.process_group import process_group
from adaptlab.engine.run_checks import check_run
from adaptlab.engine.run_folder import RunFolder
from adaptlab.engine.run_objective import RunObjective
from adaptlab.engine.scale_model import announce_scale
from adaptlab.engine.sharding import gather_adapter, shard_model
from adaptlab.engine.trained_run import OnTrained, OnTrainedLm
from adaptlab.engine.training_checkpoint import TrainingCheckpoint, TrainingPlan
from adaptlab.errors import ConfigError
from adaptlab.methods.frozen_cache import DEFAULT_MODE, check_mode
from adaptlab.models.device import torch_device
from adaptlab.models.resolve import resolve_model
from adaptlab.parallel.ranks import is_main_process
from adaptlab.parallel.shared_evaluation import shared_evaluation
from adaptlab.records.result import RunResult
from adaptlab.records.spec import RunSpec
from adaptlab.records.threads import ThreadUse
from adaptlab.records.versions import Versions
from adaptlab.runs.preparers import prepare_run
from adaptlab.runs.untrained_run import score_untrained
from adaptlab.tasks.registry import get_task, run_task, task_names
from adaptlab.tasks.unread_options import described

log = logging.getLogger("adaptlab.train")

__all__ = [
    "ADAPTER_FOLDER",
    "LOG_FILE",
    "METRICS_FILE",
    "OnTrained",
    "RunSpec",
    "check_frozen_cache",
    "execute",
]


def check_frozen_cache(mode: str, task: str | None) -> None:
    """A frozen cache other than auto only for a run of a labelled task, whose classifier
    replays its frozen front (the others have nothing to replay)."""
    if mode != DEFAULT_MODE and not run_task(task).labelled:
        labelled = ", ".join(task_names(lambda each: each.labelled))
        raise ConfigError(
            f"--frozen-cache is for runs of a labelled task ({labelled}); this one is "
            f"{described(str(task), 'run')}"
        )


def execute(
    spec: RunSpec,
    out: str | os.PathLike[str] | None = None,
    *,
    progress: bool = True,
    overwrite: bool = False,
    on_trained: OnTrained | None = None,
    on_trained_lm: OnTrainedLm | None = None,
    frozen_cache: str = DEFAULT_MODE,
    checkpoint_every: int | Literal["epoch"] | None = None,
    resume: bool = False,
    shard: bool = False,
) -> RunResult:
    """Train, pick the best epoch on dev, test it; write `out` if given; return the result.

    `on_trained`, if given, sees the trained model and data; its result joins the result.
    `on_trained_lm`, if given, scores a language-model run's trained model with
    lm-evaluation-harness; its scores join the result as `harness`.
    `frozen_cache`: see `Classification.frozen_replay` (an execution detail, not in the spec);
    other than auto, refused for a task that replays nothing and, once the adapter is added,
    "memory" or "disk" for one that trains from the first block.
    `checkpoint_every` ("epoch" or a number of steps) keeps a checkpoint beside `out`;
    `resume` goes on from it. Under a launcher's process group (`--nproc`, torchrun) every
    process trains its share and only the first writes anything; `shard` shards the model
    over the processes (FSDP2, `adaptlab.engine.sharding`).

    A spec that trains nothing (a combination, a multi-task adapter scored on one data set)
    is scored by `adaptlab.runs.untrained_run`: it writes no folder and takes none of the
    training options.
    """
    if spec.trains_nothing:
        asked = {
            "out": out,
            "on_trained": on_trained,
            "on_trained_lm": on_trained_lm,
            "checkpoint_every": checkpoint_every,
            "frozen_cache": None if frozen_cache == DEFAULT_MODE else frozen_cache,
        }
        given = [name for name, value in asked.items() if value is not None]
        if given or resume or shard:
            option = (given or ["resume" if resume else "shard"])[0]
            raise ConfigError(f"a run that trains nothing takes no {option}; it only scores")
        return score_untrained(spec)
    check_frozen_cache(frozen_cache, spec.task)
    if shard and on_trained_lm is not None:  # the first process alone would score a shard
        raise ConfigError("--shard does not combine with lm-evaluation-harness scoring yet")
    run_folder = Path(out) if out is not None else None
    checkpoint = check_run(
        spec,
        run_folder,
        overwrite=overwrite,
        checkpoint_every=checkpoint_every,
        resume=resume,
        shard=shard,
        analysed=on_trained is not None,
    )
    with process_group(torch_device(spec.device)) as device:
        if not is_main_process():
            run_folder, progress, on_trained, on_trained_lm = None, False, None, None
        return _execute(
            spec,
            run_folder,
            device,
            progress=progress,
            overwrite=overwrite,
            on_trained=on_trained,
            on_trained_lm=on_trained_lm,
            frozen_cache=frozen_cache,
            checkpoint=checkpoint,
            shard=shard,
        )


def _execute(
    spec: RunSpec,
    out: Path | None,
    device: torch.device,
    *,
    progress: bool,
    overwrite: bool,
    on_trained: OnTrained | None,
    on_trained_lm: OnTrainedLm | None,
    frozen_cache: str,
    checkpoint: TrainingCheckpoint | None,
    shard: bool,
) -> RunResult:
    """`execute` in this process, on `device`."""
    started = time.perf_counter()
    folder = RunFolder(out, overwrite, run_inputs(spec))
    resolve_model(spec.model)  # a missing or incomplete model folder fails before the data loads
    objective: RunObjective = prepare_run(run_task(spec.task), spec, device)
    model, handle = objective.model, objective.handle
    check_mode(model, frozen_cache)  # refused before the device line, not when training starts
    if checkpoint is not None:  # a checkpoint that does not fit is refused before the device line
        updates = updates_per_batch(objective)
        plan = TrainingPlan.of(objective.examples, spec.train, objective.metric, updates)
        checkpoint.check_run(model, plan, spec.train, spec.learning_rate(), spec.scale.precision)
    if shard:  # refused in one line (too few processes, mixed dtypes) before anything is said
        keep_trained_in_float32(model)
        shard_model(model)
    announce_scale(model, spec.scale)
    if not spec.scale.is_default:  # the manifest says how the adapter was trained
        scale = spec.scale
        handle.record_training_scale(
            precision=scale.precision, base_dtype=scale.base_dtype, quantize=scale.quantize
        )
    with folder:
        log.info("run %s", json.dumps(spec.to_dict()))
        log.info("data %s", objective.description)
        log.info("%s", handle.summary())
        log.info("cpu %s", ThreadUse.current().describe())
        reset_peak_memory(device)
        with objective.frozen_replay(frozen_cache, folder.staging):
            history = train_epochs(
                model,
                objective,
                spec.train,
                spec.learning_rate(),
                scale=spec.scale,
                progress=progress,
                checkpoint=checkpoint,
            )
        at_precision = autocast_at(spec.scale.precision, device)
        with at_precision, shared_evaluation(model):
            tested = objective.test()
        if shard:
            gather_adapter(handle)
        log.info("test %s", json.dumps(tested.metrics))
        for score in tested.zero_shot or ():
            log.info("zero-shot %s %s", score.data, json.dumps(score.metrics))
        counts = handle.parameter_counts()
        data = objective.data
        result = RunResult(
            spec=spec,
            data=data,
            metric=history.metric,
            judged_by=get_task(data.task).choose_metric(data.train_counts),
            epochs=tuple(history.epochs),
            best_epoch=history.best_epoch,
            dev=history.best.dev_metrics,
            test=tested.metrics,
            test_classes=tested.classes,
            test_loss=tested.loss,
            trainable_parameters=counts["trainable"],
            total_parameters=counts["total"],
            parameter_groups={k: v for k, v in counts.items() if k not in ("trainable", "total")},
            adapter_tensor_bytes=handle.tensor_bytes(),
            peak_memory_bytes=peak_memory_bytes(device),
            versions=Versions.current(),
            host=socket.gethostname(),
            threads=ThreadUse.current(),
            fusion_weights=tested.fusion_weights,
            zero_shot=tested.zero_shot,
            generations=tested.generations,
        )
        trained = objective.trained
        if on_trained is not None and trained is not None:
            began = time.perf_counter()
            with at_precision:
                result = replace(result, analysis=dict(on_trained(trained)))
            started += time.perf_counter() - began  # wall_seconds stays the run's own time
        if on_trained_lm is not None:
            began = time.perf_counter()
            with at_precision:
                result = replace(result, harness=on_trained_lm(model))
            started += time.perf_counter() - began
        published = folder.publish(model, result, started, objective.splits)
        if checkpoint is not None and is_main_process():
            checkpoint.remove()
        return published
