"""Labelled data sets as a user reads them: `adaptlab.load_dataset("rotten-tomatoes")` and
`adaptlab.low_resource(data, 1000, seed=1)`. The data layer below is handed the tasks it reads
for and never looks one up; these hand it adaptlab's registered tasks."""

from __future__ import annotations

from typing import Any

from adaptlab.data.loading import load_dataset as load_for_tasks
from adaptlab.data.subsample import low_resource as sample_for_task
from adaptlab.data.types import Dataset
from adaptlab.tasks.registry import LABELLED, get_task


def load_dataset(source: str, **options: Any) -> Dataset:
    """A built-in corpus, a data file or folder, or `hf:NAME[:CONFIG]`, read for the task its
    labels (or `task=`) say; the options are those of `adaptlab.data.loading.load_dataset`
    (`text_column`, `label_column`, `task`, `split`, ...)."""
    return load_for_tasks(source, LABELLED, **options)


def low_resource(
    dataset: Dataset, train_size: int, seed: int, *, dev_size: int | None = None
) -> Dataset:
    """`train_size` training examples and a dev set sampled as the data set's task stratifies
    (He et al. 2021, §3.2; `adaptlab.data.subsample.low_resource`)."""
    return sample_for_task(dataset, get_task(dataset.task), train_size, seed, dev_size=dev_size)
