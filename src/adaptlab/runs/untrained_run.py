"""A run that trains nothing: adapters it is given, scored on its data set's dev and test
splits, recorded as any run is (`RunResult`, no epochs, nothing trainable).

Two kinds (`RunSpec.trains_nothing`): a combination (`RunSpec.combine`), made in a scratch
folder by `adaptlab.combine_adapters` from adapters trained on several data sets; and a
multi-task run's adapter (`RunSpec.multi_task_adapter`), trained once on every data set. On
labelled data a combination scores with the head of the run's data set (where the sources
keep their own heads) and a multi-task adapter, whose one head spans every data set, with
only the run's data set's labels competing (`adaptlab.data.union`). On generative data
(`sft`, `chat`, ...) the adapter scores as a trained run of the task scores its dev and test:
the perplexity of the targets and, where the task generates, answers of the data set's
`max_new_tokens` scored against the references; causal LMs share the base's LM head. The data
set is cut as the runs of its cell cut it (`train_size`, `test_size`, the seed), so dev, test
and the training sample's class counts (which pick the judging metric) are theirs. A
combination counts no trainable parameters (none were trained for it); a multi-task adapter
counts its own, trained once for every data set it scores.
"""

from __future__ import annotations

import json
import logging
import socket
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from transformers.modeling_outputs import SequenceClassifierOutput

from adaptlab.data.chat_render import kept_template
from adaptlab.data.encoding import TextEncoder
from adaptlab.data.types import Dataset
from adaptlab.data.union import label_columns
from adaptlab.engine.memory import peak_memory_bytes, reset_peak_memory
from adaptlab.engine.precision import autocast_at
from adaptlab.engine.restore import check_data_fits, load_trained
from adaptlab.engine.run_objective import Tested
from adaptlab.errors import DataError
from adaptlab.methods.adapt import get_handle
from adaptlab.methods.combine import combine_adapters
from adaptlab.methods.manifest import adapter_folder, parse_manifest
from adaptlab.models.device import torch_device
from adaptlab.models.loading import LoadedModel
from adaptlab.records.generated import SAMPLE_SIZE
from adaptlab.records.result import DataInfo, RunResult
from adaptlab.records.spec import RunSpec
from adaptlab.records.threads import ThreadUse
from adaptlab.records.versions import Versions
from adaptlab.runs.evaluation import evaluate
from adaptlab.runs.generative_data import encode_run_data
from adaptlab.runs.generative_evaluation import Generation, score_split
from adaptlab.runs.generative_run import checked_settings
from adaptlab.runs.labelled_run import run_data
from adaptlab.runs.seq2seq_targets import check_windows
from adaptlab.tasks.adapter_manifest import read_adapter_manifests
from adaptlab.tasks.generative import GenerativeTask
from adaptlab.tasks.judging import MetricChoice
from adaptlab.tasks.registry import get_task

log = logging.getLogger("adaptlab.train")


@dataclass(frozen=True)
class _Scores:
    """What scoring an adapter on dev and test found, as a run records it."""

    data: DataInfo
    metric: str
    judged_by: MetricChoice
    dev: Mapping[str, float]
    test: Tested


def score_untrained(spec: RunSpec) -> RunResult:
    """Make or load the adapter `spec` scores, score it on dev and test, and record it."""
    started = time.perf_counter()
    device = torch_device(spec.device)
    task = None if spec.task is None else get_task(spec.task)
    generative = task if isinstance(task, GenerativeTask) else None
    dataset = None if generative is not None else run_data(spec, spec.data, spec.data_options)
    reset_peak_memory(device)
    with tempfile.TemporaryDirectory(prefix="adaptlab-combined-") as scratch:
        loaded, manifest = _scored_adapter(spec, Path(scratch))
    with autocast_at(spec.scale.precision, device):
        if generative is not None:
            scores = _generative_scores(spec, generative, loaded, manifest)
        else:
            assert dataset is not None  # read above for a labelled task
            scores = _labelled_scores(spec, loaded, manifest, dataset)
    log.info("test %s", json.dumps(scores.test.metrics))
    handle = get_handle(loaded.model, manifest["name"])
    counts = handle.parameter_counts()
    groups = (
        {} if spec.combine is not None else {k: v for k, v in counts.items() if k in handle.groups}
    )
    return RunResult(
        spec=spec,
        data=scores.data,
        metric=scores.metric,
        judged_by=scores.judged_by,
        epochs=(),
        best_epoch=0,
        dev=scores.dev,
        test=scores.test.metrics,
        test_classes=scores.test.classes,
        test_loss=scores.test.loss,
        trainable_parameters=sum(groups.values()),
        total_parameters=counts["total"],
        parameter_groups=groups,
        adapter_tensor_bytes=handle.tensor_bytes(),
        peak_memory_bytes=peak_memory_bytes(device),
        versions=Versions.current(),
        host=socket.gethostname(),
        threads=ThreadUse.current(),
        wall_seconds=time.perf_counter() - started,
        generations=scores.test.generations,
    )


def _scored_adapter(spec: RunSpec, scratch: Path) -> tuple[LoadedModel, dict[str, Any]]:
    """The model with the adapter `spec` scores and its manifest: the multi-task adapter, or
    the combination made in `scratch`, loaded with the head of the run's data set where its
    sources keep their own heads (that head's manifest)."""
    recipe = spec.combine
    if recipe is None:
        assert spec.multi_task_adapter is not None  # a run that trains nothing has one
        return load_trained(spec.multi_task_adapter, spec.device, model=spec.model)
    folders = [source.folder for source in recipe.sources]
    read_adapter_manifests(folders)
    combined = combine_adapters(folders, scratch / "combined", model=spec.model, **recipe.options)
    keeps_heads = parse_manifest(adapter_folder(combined)).heads is not None
    head = recipe.head if keeps_heads else None
    return load_trained(combined, spec.device, model=spec.model, head=head)


def _labelled_scores(
    spec: RunSpec, loaded: LoadedModel, manifest: dict[str, Any], dataset: Dataset
) -> _Scores:
    """`dataset` scored with the labelled evaluation: by a combination with its labels
    numbered as the head's, by a multi-task adapter with only its labels competing."""
    model = loaded.model
    if spec.combine is not None:
        dataset = check_data_fits(dataset, manifest, spec.data)
    task = get_task(dataset.task)
    labels = list(dataset.label_names)
    encoder = TextEncoder(loaded.tokenizer, task, len(labels), spec.train.max_length)
    scored = model if spec.combine is not None else _OwnColumns(model, manifest, dataset)
    batch = spec.train.eval_batch_size
    dev, test = (
        evaluate(
            scored, encoder, encoder.encode(dataset.splits[split]), dataset.task, labels, batch
        )
        for split in ("dev", "test")
    )
    train_counts = task.training_counts(dataset.splits["train"], labels)
    data = DataInfo(
        name=dataset.name,
        task=dataset.task,
        labels=tuple(labels),
        sizes={name: len(split) for name, split in dataset.splits.items()},
        train_counts=train_counts,
        time_split=dataset.time_split,
    )
    classes = task.evaluated_counts(test.outputs, test.labels, labels)
    return _Scores(
        data,
        task.primary_metric,
        task.choose_metric(train_counts),
        dev.metrics,
        Tested(test.loss, test.metrics, classes=classes),
    )


def _generative_scores(
    spec: RunSpec, task: GenerativeTask, loaded: LoadedModel, manifest: dict[str, Any]
) -> _Scores:
    """The run's data set read for `task` as its trained runs read it, dev and test scored as
    they score theirs: target perplexity and, where the task generates, its answers."""
    if manifest["task"] != task.name:
        raise DataError(
            f"{spec.data} is read as {task.name} data, the adapter was trained for "
            f"{manifest['task']}"
        )
    settings = checked_settings(task, spec)
    check_windows(loaded.model, spec.train.max_length, settings.max_new_tokens)
    template = kept_template(manifest, _template_source(spec))  # as the adapter was trained
    data = encode_run_data(task, spec, spec.data, settings, loaded.tokenizer, template=template)
    generation = None
    if task.generates:
        generation = Generation.of(settings)
    dev, test = (
        score_split(
            loaded.model,
            loaded.tokenizer,
            data.splits[split],
            generation,
            spec.train.eval_batch_size,
        )
        for split in ("dev", "test")
    )
    info = DataInfo(
        name=data.name,
        task=task.name,
        labels=(),
        sizes={name: len(split.encoded) for name, split in data.splits.items()},
        dropped=dict(data.dropped),
    )
    generations = test.generated[:SAMPLE_SIZE] or None
    return _Scores(
        info,
        settings.metric or task.primary_metric,
        task.choose_metric(None),
        dev.metrics,
        Tested(test.loss, test.metrics, generations=generations),
    )


def _template_source(spec: RunSpec) -> str:
    """The adapter whose manifest keeps the chat template of the adapter `spec` scores: the
    multi-task adapter, or a combination's first source (every source keeps the same one;
    the combination is made in a scratch folder gone by then)."""
    if spec.combine is not None:
        return spec.combine.sources[0].folder
    assert spec.multi_task_adapter is not None  # a run that trains nothing has one
    return spec.multi_task_adapter


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
