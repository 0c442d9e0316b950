"""Run a sequence end to end: load every stage, train them in order, test on every stage after
each one (the matrix R), summarise, and write `sequence.json` atomically."""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import replace
from fractions import Fraction
from pathlib import Path

import torch
from torch import nn
from transformers import PreTrainedTokenizerBase

from adaptlab.data import Dataset, TextEncoder, load_dataset, low_resource
from adaptlab.data.splits import strata_order, stratum, systematic_pick
from adaptlab.errors import ConfigError, DataError
from adaptlab.fileio import publish_folder, staging_folder
from adaptlab.methods import add_adapter, list_adapters, train_adapter
from adaptlab.models.device import torch_device
from adaptlab.models.loading import load_model
from adaptlab.models.resolve import resolve_model
from adaptlab.train.continual.heads import StageHeads
from adaptlab.train.continual.metrics import summarize
from adaptlab.train.continual.result import SequenceResult, StageRecord
from adaptlab.train.continual.spec import SequenceSpec
from adaptlab.train.continual.stage_loop import train_stage
from adaptlab.train.continual.stages import StageData, StageRun
from adaptlab.train.continual.strategy import make_strategy
from adaptlab.train.evaluate import evaluate
from adaptlab.train.metrics import PRIMARY_METRIC
from adaptlab.train.result import Versions

SEQUENCE_FILE = "sequence.json"


def run_sequence(
    spec: SequenceSpec,
    out: str | os.PathLike[str] | None = None,
    *,
    progress: bool = True,
    overwrite: bool = False,
) -> SequenceResult:
    """Train `spec`'s stages in order, testing every stage after each; write `out` if given."""
    started = time.perf_counter()
    out_path = Path(out) if out is not None else None
    if out_path is not None and out_path.exists() and not overwrite:
        raise ConfigError(f"{out_path} exists; pick another --out or pass --overwrite")
    device = torch_device(spec.device)
    resolve_model(spec.model)
    datasets = [stage_dataset(name, spec) for name in spec.stages]
    result = _train_sequence(spec, datasets, device, progress)
    if spec.single_stage and len(datasets) > 1:
        alone = [result.matrix[0][0]]
        for dataset in datasets[1:]:
            single = _train_sequence(
                replace(spec, stages=(dataset.name,)), [dataset], device, progress
            )
            alone.append(single.matrix[0][0])
        result = replace(result, single_stage=tuple(alone), scores=summarize(result.matrix, alone))
    result = replace(result, wall_seconds=time.perf_counter() - started)
    if out_path is not None:
        staging = staging_folder(out_path)
        try:
            (staging / SEQUENCE_FILE).write_text(json.dumps(result.to_dict(), indent=2))
            if out_path.exists():
                shutil.rmtree(out_path)
            publish_folder(staging, out_path)
        finally:
            if staging.exists():
                shutil.rmtree(staging)
    return result


def stage_dataset(name: str, spec: SequenceSpec) -> Dataset:
    """One stage's data set, sampled to `train_size` and its test set capped to `test_size`."""
    dataset = load_dataset(name)
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
    spec: SequenceSpec, datasets: list[Dataset], device: torch.device, progress: bool
) -> SequenceResult:
    seed = spec.train.seed
    loaded = load_model(spec.model, "single_label", label_names=datasets[0].label_names, seed=seed)
    model: nn.Module = loaded.model
    model.to(device)
    heads = StageHeads.install(model, [len(d.label_names) for d in datasets], seed)
    stages = [_encoded(dataset, loaded.tokenizer, spec) for dataset in datasets]
    strategy = make_strategy(spec.strategy)
    metric = PRIMARY_METRIC["single_label"]
    records, matrix, tests = [], [], []
    for index, stage in enumerate(stages):
        began = time.perf_counter()
        name = strategy.adapter_name(index)
        if name not in list_adapters(model):
            add_adapter(model, name, spec.methods, train_head=False, seed=seed + index)
        train_adapter(model, name)
        heads.select(index)
        heads.train_only(index)
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
        tests.append(tuple(row))
        matrix.append(tuple(cell[metric] for cell in row))
        records.append(
            StageRecord(
                name=stage.name,
                labels=stage.label_names,
                sizes={"train": len(stage.train), "dev": len(stage.dev), "test": len(stage.test)},
                epochs=tuple(history.epochs),
                best_epoch=history.best_epoch,
                trainable_parameters=trainable,
                seconds=time.perf_counter() - began,
            )
        )
    return SequenceResult(
        spec=spec,
        stages=tuple(records),
        metric=metric,
        matrix=tuple(matrix),
        tests=tuple(tests),
        scores=summarize(matrix),
        versions=Versions.current(),
    )


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
