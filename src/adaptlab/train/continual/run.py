"""Run a sequence end to end: load every stage, train them in order, test on every stage after
each one (the matrix R), summarise, and write `sequence.json` atomically. With a checkpoint
folder, the state after every stage is kept there and a stopped sequence goes on from it."""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Mapping, MutableMapping
from dataclasses import replace
from fractions import Fraction
from pathlib import Path
from typing import Any

import torch
from torch import nn
from transformers import PreTrainedTokenizerBase

from adaptlab.data import Dataset, TextEncoder, load_dataset, low_resource
from adaptlab.data.splits import strata_order, stratum, systematic_pick
from adaptlab.errors import DataError
from adaptlab.fileio import publish_folder, staging_folder
from adaptlab.finite import finite_json
from adaptlab.folders import FolderKind, check_result_folder
from adaptlab.models.device import torch_device
from adaptlab.models.loading import load_model
from adaptlab.models.resolve import resolve_model
from adaptlab.paths import existing, json_with_key
from adaptlab.train.continual.checkpoint import SequenceCheckpoint
from adaptlab.train.continual.decoder import check_causal_lm
from adaptlab.train.continual.heads import StageHeads
from adaptlab.train.continual.lm_run import StageDone, train_text_sequence
from adaptlab.train.continual.lm_stages import stage_corpus
from adaptlab.train.continual.metrics import summarize
from adaptlab.train.continual.result import (
    SequenceResult,
    StageOutcome,
    StageRecord,
    sequence_result,
)
from adaptlab.train.continual.spec import SequenceSpec
from adaptlab.train.continual.stage_loop import train_stage
from adaptlab.train.continual.stages import StageData, StageRun, use_stage_adapter
from adaptlab.train.continual.strategy import SequentialConfig, make_strategy
from adaptlab.train.evaluate import evaluate

SEQUENCE_FILE = "sequence.json"
SEQUENCE_FOLDER = FolderKind(
    "sequence",
    (SEQUENCE_FILE,),
    SEQUENCE_FILE,
    lambda path: json_with_key(path / SEQUENCE_FILE, "matrix"),
)
"""A sequence's folder: `sequence.json` alone (`adaptlab.folders`)."""


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
    """
    started = time.perf_counter()
    out_path = Path(out) if out is not None else None
    if out_path is not None:
        check_result_folder(out_path, overwrite, SEQUENCE_FOLDER, sequence_inputs(spec))
    device = torch_device(spec.device)
    resolve_model(spec.model)
    text = spec.objective == "causal-lm"
    if text:
        check_causal_lm(spec.model)
    load = stage_corpus if text else stage_dataset
    datasets: list[Any] = [
        load(name, spec, spec.options_of(index)) for index, name in enumerate(spec.stages)
    ]
    trainer = train_text_sequence if text else _train_sequence
    saved = SequenceCheckpoint.open(checkpoint, spec) if checkpoint is not None else None
    result = trainer(spec, datasets, device, progress, saved, on_stage)
    if spec.single_stage and len(datasets) > 1:
        alone = [result.matrix[0][0], *(saved.single_stage if saved else [])]
        for index in range(len(alone), len(datasets)):
            single = alone_spec(spec, index)
            key = alone_key(single)
            if single_scores is not None and key in single_scores:
                alone.append(single_scores[key])
            else:
                trained = trainer(single, [datasets[index]], device, progress)
                alone.append(trained.matrix[0][0])
            if single_scores is not None:
                single_scores[key] = alone[-1]
            if saved is not None:
                saved.save_single(alone[-1])
        scores = summarize(result.matrix, alone, result.metric)
        result = replace(result, single_stage=tuple(alone), scores=scores)
    result = replace(result, wall_seconds=time.perf_counter() - started)
    if out_path is not None:
        hint = "the training diverged; lower the learning rate or train fewer epochs"
        data = finite_json(result.to_dict(), SEQUENCE_FILE, hint)
        staging = staging_folder(out_path)
        try:
            (staging / SEQUENCE_FILE).write_bytes(data)
            publish_folder(staging, out_path)
        finally:
            if staging.exists():
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


def stage_dataset(
    name: str, spec: SequenceSpec, options: Mapping[str, Any] | None = None
) -> Dataset:
    """One stage's data set (read with `options`, `load_dataset` keywords), sampled to
    `train_size` and its test set capped to `test_size`."""
    dataset = load_dataset(name, **(options or {}))
    if dataset.task != "single_label":
        raise DataError(
            f"stage {name} is a {dataset.task} task; sequences take single-label "
            "classification stages"
        )
    if spec.train_size is not None:
        dataset = low_resource(dataset, spec.train_size, spec.train.seed)
    if spec.test_size is not None and spec.test_size < len(dataset.splits["test"]):
        dataset = _capped_test(dataset, spec.test_size, spec.train.seed)
    return dataset


def _train_sequence(
    spec: SequenceSpec,
    datasets: list[Dataset],
    device: torch.device,
    progress: bool,
    checkpoint: SequenceCheckpoint | None = None,
    on_stage: StageDone | None = None,
) -> SequenceResult:
    seed = spec.train.seed
    loaded = load_model(spec.model, "single_label", label_names=datasets[0].label_names, seed=seed)
    model: nn.Module = loaded.model
    model.to(device)
    heads = StageHeads.install(model, [len(d.label_names) for d in datasets], seed)
    stages = [_encoded(dataset, loaded.tokenizer, spec) for dataset in datasets]
    strategy = make_strategy(spec.strategy)
    outcomes = list(checkpoint.completed) if checkpoint is not None else []
    if outcomes:
        for index in range(len(outcomes)):
            use_stage_adapter(
                model, strategy.adapter_name(index), spec.methods, spec.train.seed + index
            )
        assert checkpoint is not None
        strategy.load_state(model, checkpoint.restore(model))
    for index in range(len(outcomes), len(stages)):
        stage = stages[index]
        began = time.perf_counter()
        use_stage_adapter(
            model, strategy.adapter_name(index), spec.methods, spec.train.seed + index
        )
        heads.select(index)
        heads.train_only(index)
        trained = {n for n, p in model.named_parameters() if p.requires_grad}
        trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
        run = StageRun(model, heads, stages, index, seed, spec.train.eval_batch_size)
        strategy.begin(run)
        history = train_stage(run, strategy, spec.train, spec.learning_rate(), progress=progress)
        row = []
        for tested, other in enumerate(stages):
            strategy.route(model, tested, index)
            heads.select(tested)
            tested_on = evaluate(
                model,
                other.encoder,
                other.test,
                "single_label",
                other.label_names,
                spec.train.eval_batch_size,
            )
            row.append({**tested_on.metrics, "loss": tested_on.loss})
        record = StageRecord(
            name=stage.name,
            labels=stage.label_names,
            sizes={"train": len(stage.train), "dev": len(stage.dev), "test": len(stage.test)},
            epochs=tuple(history.epochs),
            best_epoch=history.best_epoch,
            trainable_parameters=trainable,
            seconds=time.perf_counter() - began,
        )
        outcome = StageOutcome(record, tuple(row))
        outcomes.append(outcome)
        if checkpoint is not None:
            checkpoint.save_stage(outcome, model, trained, strategy.state())
        if on_stage is not None:
            on_stage(index, outcome)
    return sequence_result(spec, outcomes)


def _encoded(dataset: Dataset, tokenizer: PreTrainedTokenizerBase, spec: SequenceSpec) -> StageData:
    encoder = TextEncoder(
        tokenizer,
        "single_label",
        len(dataset.label_names),
        spec.train.max_length,
    )
    splits = {name: encoder.encode(examples) for name, examples in dataset.splits.items()}
    return StageData(
        name=dataset.name,
        label_names=dataset.label_names,
        encoder=encoder,
        train=splits["train"],
        dev=splits["dev"],
        test=splits["test"],
    )


def _capped_test(dataset: Dataset, size: int, seed: int) -> Dataset:
    """`dataset` with `size` test examples, stratified by label, seeded."""
    test = dataset.splits["test"]
    keys = [stratum(example.label, dataset.task, None) for example in test]
    stream = [index for group in strata_order(keys, seed) for index in group]
    picked, _ = systematic_pick(stream, Fraction(size, len(stream)))
    splits = {**dataset.splits, "test": tuple(test[index] for index in sorted(picked))}
    note = f" Test capped to {size} examples (stratified, seed {seed})."
    return replace(dataset, splits=splits, description=dataset.description + note)
