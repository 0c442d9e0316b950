"""A run that trains nothing: adapters it is given, scored on its data set's dev and test
splits, recorded as any run is (`RunResult`, no epochs, nothing trainable).

Two kinds (`RunSpec.trains_nothing`): a combination (`RunSpec.combine`), made in a scratch
folder by `adaptlab.combine_adapters` from adapters trained on several data sets and scored
with the head of the run's data set; and a multi-task run's adapter
(`RunSpec.multi_task_adapter`), whose one head spans every data set it was trained on, scored
with only the run's data set's labels competing (`adaptlab.data.union`). The data set is cut
as the runs of its cell cut it (`train_size`, `test_size`, the seed), so dev, test and the
training sample's class counts (which pick the judging metric) are theirs. A combination
counts no trainable parameters (none were trained for it); a multi-task adapter counts its
own, trained once for every data set it scores.
"""

from __future__ import annotations

import json
import logging
import socket
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from transformers.modeling_outputs import SequenceClassifierOutput

from adaptlab.data.encoding import TextEncoder
from adaptlab.data.types import Dataset
from adaptlab.data.union import label_columns
from adaptlab.engine.memory import peak_memory_bytes, reset_peak_memory
from adaptlab.engine.precision import autocast_at
from adaptlab.engine.restore import check_data_fits, load_trained
from adaptlab.methods.adapt import get_handle
from adaptlab.methods.combine import combine_adapters
from adaptlab.models.device import torch_device
from adaptlab.records.result import DataInfo, RunResult, Versions
from adaptlab.records.spec import RunSpec
from adaptlab.tasks.evaluation import Evaluation, evaluate
from adaptlab.tasks.labelled_run import run_data
from adaptlab.tasks.registry import get_task

log = logging.getLogger("adaptlab.train")


def score_untrained(spec: RunSpec) -> RunResult:
    """Make or load the adapter `spec` scores, score it on dev and test, and record it."""
    started = time.perf_counter()
    device = torch_device(spec.device)
    dataset = run_data(spec, spec.data, spec.data_options)
    reset_peak_memory(device)
    with tempfile.TemporaryDirectory(prefix="adaptlab-combined-") as scratch:
        model, tokenizer, manifest, dataset = _scored_model(spec, dataset, Path(scratch))
    handle = get_handle(model, manifest["name"])
    task = get_task(dataset.task)
    labels = list(dataset.label_names)
    encoder = TextEncoder(tokenizer, dataset.task, len(labels), spec.train.max_length)
    scored = model if spec.combine is not None else _OwnColumns(model, manifest, dataset)

    def score(split: str) -> Evaluation:
        features = encoder.encode(dataset.splits[split])
        with autocast_at(spec.scale.precision, device):
            return evaluate(
                scored, encoder, features, dataset.task, labels, spec.train.eval_batch_size
            )

    dev, test = score("dev"), score("test")
    log.info("test %s", json.dumps(test.metrics))
    train_counts = task.training_counts(dataset.splits["train"], labels)
    counts = handle.parameter_counts()
    groups = (
        {} if spec.combine is not None else {k: v for k, v in counts.items() if k in handle.groups}
    )
    return RunResult(
        spec=spec,
        data=DataInfo(
            name=dataset.name,
            task=dataset.task,
            labels=tuple(labels),
            sizes={name: len(split) for name, split in dataset.splits.items()},
            train_counts=train_counts,
            time_split=dataset.time_split,
        ),
        metric=task.primary_metric,
        judged_by=task.choose_metric(train_counts),
        epochs=(),
        best_epoch=0,
        dev=dev.metrics,
        test=test.metrics,
        test_classes=task.evaluated_counts(test.outputs, test.labels, labels),
        test_loss=test.loss,
        trainable_parameters=sum(groups.values()),
        total_parameters=counts["total"],
        parameter_groups=groups,
        adapter_tensor_bytes=handle.tensor_bytes(),
        peak_memory_bytes=peak_memory_bytes(device),
        versions=Versions.current(),
        host=socket.gethostname(),
        wall_seconds=time.perf_counter() - started,
    )


def _scored_model(
    spec: RunSpec, dataset: Dataset, scratch: Path
) -> tuple[nn.Module, Any, dict[str, Any], Dataset]:
    """The model with the adapter `spec` scores, its tokenizer, its manifest (that of the
    head chosen), and `dataset` with its labels numbered as the head's (a combination's)."""
    recipe = spec.combine
    if recipe is None:
        assert spec.multi_task_adapter is not None  # a run that trains nothing has one
        loaded, manifest = load_trained(spec.multi_task_adapter, spec.device, model=spec.model)
        return loaded.model, loaded.tokenizer, manifest, dataset
    folders = [source.folder for source in recipe.sources]
    combined = combine_adapters(folders, scratch / "combined", model=spec.model, **recipe.options)
    loaded, manifest = load_trained(combined, spec.device, model=spec.model, head=recipe.head)
    return loaded.model, loaded.tokenizer, manifest, check_data_fits(dataset, manifest, spec.data)


class _OwnColumns(nn.Module):
    """A multi-task model scored on one of its data sets: its head's columns for that data
    set's labels, in its label order, the loss taken over those alone."""

    def __init__(self, model: nn.Module, manifest: dict[str, Any], dataset: Dataset) -> None:
        super().__init__()
        self.model = model
        union: Sequence[str] = manifest.get("label_names") or ()
        self.columns = torch.tensor(label_columns(union, dataset))

    def forward(self, labels: torch.Tensor, **batch: torch.Tensor) -> SequenceClassifierOutput:
        logits = self.model(**batch).logits.index_select(-1, self.columns.to(labels.device))
        return SequenceClassifierOutput(loss=F.cross_entropy(logits.float(), labels), logits=logits)
