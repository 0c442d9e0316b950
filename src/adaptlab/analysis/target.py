"""What an analysis runs on: a trained model (adaptation on, base one switch away) and data.

A trained adapter or run folder is rebuilt with its base model loaded under the run's seed,
so the head starts where training started and `adapt` reproduces the inserted modules'
initial values: the handle then holds theta0 for every trained tensor (§5's landscape), and
`disabled()` gives the base model from the same object, full fine-tuning included.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torch import nn

from adaptlab.data.encoding import TextEncoder
from adaptlab.data.loading import load_dataset
from adaptlab.data.subsample import low_resource
from adaptlab.data.types import Dataset
from adaptlab.engine.outputs import METRICS_FILE
from adaptlab.engine.restore import check_data_fits, check_split, load_trained
from adaptlab.methods.manifest import RUN_ADAPTER_FOLDER, adapter_folder
from adaptlab.records.config import TrainConfig
from adaptlab.records.result import read_result
from adaptlab.records.spec import RunSpec


@dataclass
class Target:
    """An adapted model and the encoded examples to analyse it on."""

    model: nn.Module
    encoder: TextEncoder
    features: Sequence[dict[str, Any]]
    task: str
    label_names: tuple[str, ...]
    special_ids: frozenset[int]
    data: str  # how the examples were chosen, for the report


def load_target(
    path: str | os.PathLike[str],
    data: str,
    data_options: Mapping[str, Any] | None = None,
    *,
    split: str = "dev",
    device: str = "cpu",
    model: str | None = None,
) -> Target:
    """The trained model of `path` and the `split` of `data`.

    When `path` is a run folder trained on `data` with a train size, the split is the run's own
    low-resource split (same size and seed), so "dev" is the dev set the run was tuned on.
    `model` is the base model to load (see `adaptlab.engine.restore.load_trained`).
    """
    check_split(split)
    loaded, manifest = load_trained(path, device, model=model)
    labels = tuple(manifest.get("label_names") or ())
    dataset = load_dataset(data, **dict(data_options or {}))
    dataset = check_data_fits(dataset, manifest, data)
    run = _run_record(adapter_folder(path), data)
    dataset, max_length = _as_in_run(dataset, run)
    encoder = TextEncoder(loaded.tokenizer, dataset.task, len(labels), max_length)
    examples = dataset.splits[split]
    return Target(
        model=loaded.model,
        encoder=encoder,
        features=encoder.encode(examples),
        task=dataset.task,
        label_names=labels,
        special_ids=frozenset(loaded.tokenizer.all_special_ids),
        data=f"{dataset.name} {split} ({len(examples)} examples"
        + (", the run's own split)" if run else ")"),
    )


def _run_record(folder: Path, data: str) -> RunSpec | None:
    """The spec of the run whose adapter folder is `folder`, when it trained on `data`."""
    record = (folder.parent if folder.name == RUN_ADAPTER_FOLDER else folder) / METRICS_FILE
    if not record.is_file():
        return None
    spec = read_result(record).spec
    return spec if _same_data(spec.data, data) else None


def _same_data(recorded: str, given: str) -> bool:
    """Whether two data arguments name the same source (`./x.csv` and `x.csv` do)."""
    if recorded == given:
        return True
    a, b = Path(recorded).expanduser(), Path(given).expanduser()
    return a.exists() and b.exists() and a.resolve() == b.resolve()


def _as_in_run(dataset: Dataset, run: RunSpec | None) -> tuple[Dataset, int]:
    """The dataset cut as the run cut it, and the run's max length (the default without one)."""
    if run is None:
        return dataset, TrainConfig().max_length
    if run.train_size is not None:
        dataset = low_resource(dataset, run.train_size, run.train.seed)
    return dataset, run.train.max_length
