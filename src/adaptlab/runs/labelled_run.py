"""A run on a labelled data set (`adaptlab train` for every task but mlm): the data set read
and cut to `train_size` (a multi-task run's data sets each cut so, then united), the zero-shot
targets read, the model loaded with a head for the task and its adapters attached, every split
encoded; after training, the test split scored with per-class counts, the zero-shot targets
and, for a fusion, the fusion weights on dev."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch import nn

from adaptlab.data.encoding import TextEncoder
from adaptlab.data.loading import load_dataset
from adaptlab.data.subsample import cut_to_sizes
from adaptlab.data.types import Dataset
from adaptlab.data.union import union_of
from adaptlab.engine.adapters import attach_adapters
from adaptlab.engine.run_objective import Tested
from adaptlab.engine.scale_model import prepare_base
from adaptlab.engine.trained_run import TrainedRun
from adaptlab.methods.handle import AdaptHandle
from adaptlab.models.loading import load_model
from adaptlab.records.result import DataInfo
from adaptlab.records.spec import RunSpec
from adaptlab.records.split_record import SplitRecord
from adaptlab.runs.evaluation import evaluate
from adaptlab.runs.fusion_weights import mean_fusion_weights
from adaptlab.runs.labelled_objective import Classification
from adaptlab.runs.preparers import prepares
from adaptlab.runs.zero_shot import PreparedTarget, prepare_targets, score_targets
from adaptlab.tasks.labelled import LabelledTask
from adaptlab.tasks.registry import LABELLED, get_task


class ClassificationRun(Classification):
    """`Classification` over a run's data set, with what `execute` asks (`RunObjective`)."""

    def __init__(
        self,
        spec: RunSpec,
        model: nn.Module,
        handle: AdaptHandle,
        encoder: TextEncoder,
        dataset: Dataset,
        targets: Sequence[PreparedTarget],
    ) -> None:
        self.features = {name: encoder.encode(part) for name, part in dataset.splits.items()}
        super().__init__(
            model,
            encoder,
            self.features["train"],
            self.features["dev"],
            dataset.task,
            dataset.label_names,
            spec.train.eval_batch_size,
        )
        self.spec, self.handle, self.dataset, self.targets = spec, handle, dataset, targets
        self.description = dataset.description

    @property
    def data(self) -> DataInfo:
        dataset = self.dataset
        return DataInfo(
            name=dataset.name,
            task=dataset.task,
            labels=tuple(dataset.label_names),
            sizes={k: len(v) for k, v in dataset.splits.items()},
            train_counts=get_task(dataset.task).training_counts(
                dataset.splits["train"], self.label_names
            ),
            time_split=dataset.time_split,
        )

    @property
    def splits(self) -> SplitRecord:
        origins = {split: [e.origin for e in part] for split, part in self.dataset.splits.items()}
        return SplitRecord.of(self.spec.data, origins)

    @property
    def trained(self) -> TrainedRun:
        return TrainedRun.labelled(self.model, self.encoder, self.dataset, self.features)

    def test(self) -> Tested:
        model, encoder, batch_size = self.model, self.encoder, self.eval_batch_size
        test = evaluate(
            model, encoder, self.features["test"], self.task, self.label_names, batch_size
        )
        zero_shot = score_targets(model, encoder, self.targets, batch_size)
        return Tested(
            loss=test.loss,
            metrics=test.metrics,
            classes=get_task(self.task).evaluated_counts(
                test.outputs, test.labels, self.label_names
            ),
            zero_shot=zero_shot or None,
            fusion_weights=(
                mean_fusion_weights(model, self.handle, encoder, self.dev_features, batch_size)
                if self.handle.is_fusion
                else None
            ),
        )


@prepares(LabelledTask)
def prepare_classification(
    task: LabelledTask, spec: RunSpec, device: torch.device
) -> ClassificationRun:
    """Read `spec`'s data (the union of its data sets for a multi-task run) and zero-shot
    targets, load and adapt its model on `device`. The data set's task heads the model: `task`
    is the first labelled one when the data's labels decide."""
    dataset = run_data(spec, spec.data, spec.data_options)
    if spec.multi_task:
        others = [run_data(spec, task.data, task.data_options) for task in spec.multi_task]
        dataset = union_of([dataset, *others])
    targets = prepare_targets(spec.zero_shot, dataset)
    head = get_task(dataset.task).model_kind
    loaded = load_model(
        spec.model, head, label_names=dataset.label_names or None, seed=spec.train.seed
    )
    model: nn.Module = loaded.model
    prepare_base(model, spec.scale, device)
    handle = attach_adapters(model, spec)
    encoder = TextEncoder(
        loaded.tokenizer, get_task(dataset.task), len(dataset.label_names), spec.train.max_length
    )
    return ClassificationRun(spec, model, handle, encoder, dataset, targets)


def run_data(spec: RunSpec, data: str, options: Mapping[str, Any]) -> Dataset:
    """The data set `data` as `spec`'s run reads it: cut to its `train_size` and `test_size`
    with its seed."""
    dataset = load_dataset(data, LABELLED, **options)
    task = get_task(dataset.task)
    return cut_to_sizes(dataset, task, spec.train_size, spec.test_size, spec.train.seed)
