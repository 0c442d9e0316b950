"""One training run end to end: data, model, method, training, test, and its files.

`execute` is what `adaptlab train` and every study run call. It validates everything it can
before any long work, and writes its folder atomically: files go to a hidden sibling folder
that is renamed into place only when the run has finished, so nothing half-written is left.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import socket
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from torch import nn

from adaptlab.data import Dataset, TextEncoder, load_dataset, low_resource
from adaptlab.fileio import publish_folder, staging_folder
from adaptlab.methods import save_adapter
from adaptlab.models.device import torch_device
from adaptlab.models.loading import load_model
from adaptlab.models.resolve import resolve_model
from adaptlab.train.adapters import attach_adapters
from adaptlab.train.classes import evaluated_counts, training_counts
from adaptlab.train.evaluate import evaluate
from adaptlab.train.fusion_weights import mean_fusion_weights
from adaptlab.train.loop import train
from adaptlab.train.memory import peak_memory_bytes, reset_peak_memory
from adaptlab.train.outputs import ADAPTER_FOLDER, LOG_FILE, METRICS_FILE, check_run_folder
from adaptlab.train.result import DataInfo, RunResult, Versions
from adaptlab.train.spec import RunSpec

log = logging.getLogger("adaptlab.train")


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
) -> RunResult:
    """Train, pick the best epoch on dev, test it; write `out` if given; return the result.

    `on_trained`, if given, sees the trained model and data; its result joins the result.
    """
    started = time.perf_counter()
    out_path = Path(out) if out is not None else None
    if out_path is not None:
        check_run_folder(out_path, overwrite)
    device = torch_device(spec.device)
    resolve_model(spec.model)  # a missing or incomplete model folder fails before the data loads
    dataset = prepare_data(spec)
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

    staging = staging_folder(out_path) if out_path is not None else None
    handler = _log_to(staging / LOG_FILE) if staging else None
    try:
        log.info("run %s", json.dumps(spec.to_dict()))
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
        counts = handle.parameter_counts()
        result = RunResult(
            spec=spec,
            data=DataInfo(
                name=dataset.name,
                task=dataset.task,
                labels=tuple(dataset.label_names),
                sizes={k: len(v) for k, v in dataset.splits.items()},
                train_counts=training_counts(
                    dataset.task, dataset.splits["train"], dataset.label_names
                ),
            ),
            metric=history.metric,
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
        )
        if on_trained is not None:
            began = time.perf_counter()
            analysis = dict(on_trained(TrainedRun(model, encoder, dataset, features)))
            result = replace(result, analysis=analysis)
            started += time.perf_counter() - began  # wall_seconds stays the run's own time
        if staging is not None and out_path is not None:
            adapter = save_adapter(
                model,
                staging / ADAPTER_FOLDER,
                base_model_id=spec.model,
                task=dataset.task,
                label_names=dataset.label_names,
                metrics={"dev": dict(result.dev), "test": dict(result.test)},
            )
            result = replace(
                result,
                adapter_bytes=sum(f.stat().st_size for f in adapter.iterdir()),
                wall_seconds=time.perf_counter() - started,
            )
            (staging / METRICS_FILE).write_text(json.dumps(result.to_dict(), indent=2))
            if handler:
                _close(handler)
                handler = None
            publish_folder(staging, out_path)
        return replace(result, wall_seconds=time.perf_counter() - started)
    finally:
        if handler:
            _close(handler)
        if staging is not None and staging.exists():
            shutil.rmtree(staging)


def _log_to(path: Path) -> logging.Handler:
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    logger = logging.getLogger("adaptlab")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    return handler


def _close(handler: logging.Handler) -> None:
    logging.getLogger("adaptlab").removeHandler(handler)
    handler.close()
