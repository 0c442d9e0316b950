"""Run a sequence end to end: load every stage, train them in order, test on every stage after
each one (the matrix R), summarise, and write `sequence.json` atomically. With a checkpoint
folder, the state after every stage is kept there and a stopped sequence goes on from it."""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import MutableMapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from adaptlab.continual.checkpoint import SequenceCheckpoint
from adaptlab.continual.metrics import summarize
from adaptlab.continual.objectives import get_objective
from adaptlab.continual.registry import make_strategy
from adaptlab.continual.result import SequenceResult
from adaptlab.continual.sequence import StageDone, train_sequence
from adaptlab.continual.sequential import SequentialConfig
from adaptlab.continual.spec import SequenceSpec
from adaptlab.engine.outputs import ADAPTER_FOLDER
from adaptlab.engine.process_group import process_group
from adaptlab.fileio import publish_folder, staging_folder
from adaptlab.finite import finite_json
from adaptlab.folders import FolderKind, check_result_folder
from adaptlab.models.decoder import check_causal_lm
from adaptlab.models.device import torch_device
from adaptlab.models.resolve import resolve_model
from adaptlab.parallel.ranks import is_main_process
from adaptlab.paths import existing, json_with_key

SEQUENCE_FILE = "sequence.json"
SEQUENCE_FOLDER = FolderKind(
    "sequence",
    (SEQUENCE_FILE, ADAPTER_FOLDER),
    SEQUENCE_FILE,
    lambda path: json_with_key(path / SEQUENCE_FILE, "matrix"),
)
"""A sequence's folder: `sequence.json`, and the trained adapter in `adapter/` where the
objective keeps it (a causal-LM sequence's; `adaptlab.folders`)."""


def run_sequence(
    spec: SequenceSpec,
    out: str | os.PathLike[str] | None = None,
    *,
    progress: bool = True,
    overwrite: bool = False,
    checkpoint: str | os.PathLike[str] | None = None,
    on_stage: StageDone | None = None,
    single_scores: MutableMapping[str, float] | None = None,
) -> SequenceResult:
    """Train `spec`'s stages in order, testing every stage after each; write `out` if given.

    `checkpoint`: a folder keeping the state after every stage; a sequence stopped half-way
    (even by kill -9) and run again with it starts after its last finished stage.
    `single_scores`: single-stage scores by `alone_key`, shared by sequences that differ only
    in their strategy: a score found there is not trained again, and new ones are added.
    Under a launcher's process group (`--nproc`, torchrun) only the first process writes.
    """
    started = time.perf_counter()
    out_path = Path(out) if out is not None else None
    if out_path is not None:
        check_result_folder(out_path, overwrite, SEQUENCE_FOLDER, sequence_inputs(spec))
    with process_group(torch_device(spec.device)) as device:
        if not is_main_process():
            out_path, progress, on_stage = None, False, None
        return _run_sequence(
            spec, out_path, device, progress, checkpoint, on_stage, single_scores, started
        )


def _run_sequence(
    spec: SequenceSpec,
    out_path: Path | None,
    device: torch.device,
    progress: bool,
    checkpoint: str | os.PathLike[str] | None,
    on_stage: StageDone | None,
    single_scores: MutableMapping[str, float] | None,
    started: float,
) -> SequenceResult:
    """`run_sequence` in this process, on `device`."""
    resolve_model(spec.model)
    objective = get_objective(spec.objective)
    if objective.needs_causal_lm:
        check_causal_lm(spec.model, f"objective {objective.name}")
    stage_data = [
        objective.read_stage(name, spec.options_of(index), spec)
        for index, name in enumerate(spec.stages)
    ]
    saved = SequenceCheckpoint.open(checkpoint, spec) if checkpoint is not None else None
    staging = staging_folder(out_path) if out_path is not None else None
    try:
        keep = staging / ADAPTER_FOLDER if staging is not None and objective.keeps_adapter else None
        result = _train_sequence(spec, stage_data, device, progress, saved, on_stage, keep)
        if spec.single_stage and len(stage_data) > 1:
            alone = [result.matrix[0][0], *(saved.single_stage if saved else [])]
            for index in range(len(alone), len(stage_data)):
                single = alone_spec(spec, index)
                key = alone_key(single)
                if single_scores is not None and key in single_scores:
                    alone.append(single_scores[key])
                else:
                    trained = _train_sequence(single, [stage_data[index]], device, progress)
                    alone.append(trained.matrix[0][0])
                if single_scores is not None:
                    single_scores[key] = alone[-1]
                if saved is not None:
                    saved.save_single(alone[-1])
            scores = summarize(result.matrix, alone, result.metric)
            result = replace(result, single_stage=tuple(alone), scores=scores)
        result = replace(result, wall_seconds=time.perf_counter() - started)
        if staging is not None and out_path is not None:
            hint = "the training diverged; lower the learning rate or train fewer epochs"
            data = finite_json(result.to_dict(), SEQUENCE_FILE, hint)
            (staging / SEQUENCE_FILE).write_bytes(data)
            publish_folder(staging, out_path)
    finally:
        if staging is not None and staging.exists():
            shutil.rmtree(staging)
    return result


def sequence_inputs(spec: SequenceSpec) -> list[tuple[Path, str]]:
    """The sequence's base model folder and stage data files that exist on this machine."""
    return existing([(spec.model, "base model"), *((stage, "stage data") for stage in spec.stages)])


def alone_spec(spec: SequenceSpec, index: int) -> SequenceSpec:
    """Stage `index` of `spec` trained on its own: the same model, method, data, sizes and
    training, with no strategy (one stage has nothing earlier to keep)."""
    return replace(
        spec,
        stages=(spec.stages[index],),
        stage_options=(spec.options_of(index),) if spec.stage_options else (),
        strategy=SequentialConfig(),
        single_stage=False,
    )


def alone_key(spec: SequenceSpec) -> str:
    """What identifies a single-stage training (canonical JSON of its spec)."""
    return json.dumps(spec.to_dict(), sort_keys=True, separators=(",", ":"))


def _train_sequence(
    spec: SequenceSpec,
    data: Sequence[Any],
    device: torch.device,
    progress: bool,
    checkpoint: SequenceCheckpoint | None = None,
    on_stage: StageDone | None = None,
    keep: Path | None = None,
) -> SequenceResult:
    """Load `spec.model` on `device` with the stages of `data` (each stage's data as its
    objective read it) and train them with the spec's strategy, testing every stage after each."""
    objective = get_objective(spec.objective)
    stages = objective.load_stages(spec, data, device)
    strategy = make_strategy(spec.strategy, objective.name)
    return train_sequence(spec, stages, strategy, progress, checkpoint, on_stage, keep)
