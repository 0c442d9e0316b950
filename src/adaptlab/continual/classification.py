"""`classification`: task-incremental learning. Each stage is a labelled data set whose
examples each belong to one class, sampled to `train_size` examples (as many for dev) with its
test set capped to `test_size` (stratified by label); the model gets a head per stage and the
matrix holds accuracies."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from adaptlab.continual.objectives import register_objective
from adaptlab.continual.sequence_objective import SequenceObjective, SequenceSettings
from adaptlab.errors import DataError
from adaptlab.tasks.registry import LABELLED, get_task

if TYPE_CHECKING:
    import torch

    from adaptlab.continual.labelled_stages import LabelledStages
    from adaptlab.data.types import Dataset


class Classification(SequenceObjective):
    """A head per labelled stage, scored by accuracy."""

    name = "classification"
    description = "a head per labelled stage, accuracy"
    metric = "accuracy"
    unit = "examples"
    data_options = get_task("single_label").data_options

    def check_stage_task(self, source: str, task: str) -> None:
        if not get_task(task).one_class_each:
            raise DataError(
                f"stage {source} is a {task} task; sequences take single-label "
                "classification stages"
            )

    def read_stage(
        self, source: str, options: Mapping[str, Any], spec: SequenceSettings
    ) -> Dataset:
        from adaptlab.continual.labelled_stages import sampled
        from adaptlab.data.loading import load_dataset

        dataset = load_dataset(source, LABELLED, **options)
        self.check_stage_task(source, dataset.task)
        return sampled(dataset, spec)

    def load_stages(
        self, spec: SequenceSettings, data: Sequence[Any], device: torch.device
    ) -> LabelledStages:
        from adaptlab.continual.labelled_stages import LabelledStages

        return LabelledStages.load(spec, data, device)


CLASSIFICATION = register_objective(Classification())
