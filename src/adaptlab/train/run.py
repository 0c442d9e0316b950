"""One training run end to end: data, model, method, training, test, and its files.

`execute` is what `adaptlab train` and every study run call. It validates everything it can
before any long work, and writes its folder atomically (`adaptlab.train.run_folder`).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from torch import nn

from adaptlab.data import Dataset, TextEncoder, load_dataset, low_resource
from adaptlab.errors import ConfigError
from adaptlab.models.device import torch_device
from adaptlab.models.loading import load_model
from adaptlab.models.resolve import resolve_model
from adaptlab.tasks import MLM
from adaptlab.train.adapters import attach_adapters
from adaptlab.train.choice import choose_metric
from adaptlab.train.classes import evaluated_counts, training_counts
from adaptlab.train.evaluate import evaluate
from adaptlab.train.fusion_weights import mean_fusion_weights
from adaptlab.train.inputs import run_inputs
from adaptlab.train.loop import train
from adaptlab.train.memory import peak_memory_bytes, reset_peak_memory
from adaptlab.train.outputs import ADAPTER_FOLDER, LOG_FILE, METRICS_FILE
from adaptlab.train.result import DataInfo, RunResult, Versions
from adaptlab.train.run_folder import RunFolder
from adaptlab.train.spec import RunSpec
from adaptlab.train.split_record import SplitRecord
from adaptlab.train.zero_shot import prepare_targets, score_targets

log = logging.getLogger("adaptlab.train")

__all__ = ["ADAPTER_FOLDER", "LOG_FILE", "METRICS_FILE", "RunSpec", "TrainedRun", "execute"]


@dataclass(frozen=True)
class TrainedRun:
    """What `execute` hands its `on_trained` callback before the model is released: the model at
    its best epoch, still adapted (so `adaptlab.disabled` gives its base and the handle keeps
    the starting weights), and the run's data set with every split encoded."""

    model: nn.Module
    encoder: TextEncoder
    dataset: Dataset
    features: Mapping[str, Sequence[dict[str, Any]]]


OnTrained = Callable[[TrainedRun], Mapping[str, Any]]
"""A callback whose JSON-ready result is stored as the result's `analysis`."""


def prepare_data(spec: RunSpec) -> Dataset:
    """The run's data set, cut to the low-resource protocol when `train_size` is set."""
    dataset = load_dataset(spec.data, **spec.data_options)
    if spec.train_size is not None:
        dataset = low_resource(dataset, spec.train_size, spec.train.seed)
    return dataset


def execute(
    spec: RunSpec,
    out: str | os.PathLike[str] | None = None,
    *,
    progress: bool = True,
    overwrite: bool = False,
    on_trained: OnTrained | None = None,
    frozen_cache: str = "auto",
) -> RunResult:
    """Train, pick the best epoch on dev, test it; write `out` if given; return the result.

    `on_trained`, if given, sees the trained model and data; its result joins the result.
    `frozen_cache`: see `adaptlab.train.loop.train` (an execution detail, not part of the spec).
    A masked-language-modelling spec (task mlm) runs `adaptlab.train.mlm.execute_mlm`.
    """
    if spec.data_options.get("task") == MLM:
        if on_trained is not None:
            raise ConfigError("analyses need a labelled task; a masked-LM run takes none")
        from adaptlab.train.mlm import execute_mlm

        return execute_mlm(spec, out, progress=progress, overwrite=overwrite)
    started = time.perf_counter()
    folder = RunFolder(Path(out) if out is not None else None, overwrite, run_inputs(spec))
    device = torch_device(spec.device)
    resolve_model(spec.model)  # a missing or incomplete model folder fails before the data loads
    dataset = prepare_data(spec)
    targets = prepare_targets(spec.zero_shot, dataset)
    loaded = load_model(
        spec.model, dataset.task, label_names=dataset.label_names or None, seed=spec.train.seed
    )
    model: nn.Module = loaded.model
    model.to(device)
    handle = attach_adapters(model, spec)
    encoder = TextEncoder(
        loaded.tokenizer, dataset.task, len(dataset.label_names), spec.train.max_length
    )
    features = {name: encoder.encode(examples) for name, examples in dataset.splits.items()}

    with folder:
        log.info("run %s", json.dumps(spec.to_dict()))
        log.info("data %s", dataset.description)
        log.info("%s", handle.summary())
        reset_peak_memory(device)
        history = train(
            model,
            encoder,
            features["train"],
            features["dev"],
            dataset.task,
            dataset.label_names,
            spec.train,
            spec.learning_rate(),
            progress=progress,
            frozen_cache=frozen_cache,
            cache_folder=folder.staging,
        )
        test = evaluate(
            model,
            encoder,
            features["test"],
            dataset.task,
            dataset.label_names,
            spec.train.eval_batch_size,
        )
        log.info("test %s", json.dumps(test.metrics))
        zero_shot = score_targets(model, encoder, targets, spec.train.eval_batch_size)
        for score in zero_shot:
            log.info("zero-shot %s %s", score.data, json.dumps(score.metrics))
        counts = handle.parameter_counts()
        train_counts = training_counts(dataset.task, dataset.splits["train"], dataset.label_names)
        result = RunResult(
            spec=spec,
            data=DataInfo(
                name=dataset.name,
                task=dataset.task,
                labels=tuple(dataset.label_names),
                sizes={k: len(v) for k, v in dataset.splits.items()},
                train_counts=train_counts,
                time_split=dataset.time_split,
            ),
            metric=history.metric,
            judged_by=choose_metric(dataset.task, train_counts),
            epochs=tuple(history.epochs),
            best_epoch=history.best_epoch,
            dev=history.best.dev_metrics,
            test=test.metrics,
            test_classes=evaluated_counts(
                dataset.task, test.outputs, test.labels, dataset.label_names
            ),
            test_loss=test.loss,
            trainable_parameters=counts["trainable"],
            total_parameters=counts["total"],
            parameter_groups={k: v for k, v in counts.items() if k not in ("trainable", "total")},
            adapter_tensor_bytes=handle.tensor_bytes(),
            peak_memory_bytes=peak_memory_bytes(device),
            versions=Versions.current(),
            host=socket.gethostname(),
            fusion_weights=(
                mean_fusion_weights(
                    model, handle, encoder, features["dev"], spec.train.eval_batch_size
                )
                if handle.is_fusion
                else None
            ),
            zero_shot=zero_shot or None,
        )
        if on_trained is not None:
            began = time.perf_counter()
            analysis = dict(on_trained(TrainedRun(model, encoder, dataset, features)))
            result = replace(result, analysis=analysis)
            started += time.perf_counter() - began  # wall_seconds stays the run's own time
        origins = {split: [e.origin for e in part] for split, part in dataset.splits.items()}
        splits = SplitRecord.of(spec.data, origins)
        return folder.publish(model, result, dataset.task, dataset.label_names, started, splits)
