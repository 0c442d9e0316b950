"""Score a trained run, zero-shot, on the test splits of other data sets (`RunSpec.zero_shot`).

Each target is read and its labels matched to the training data's by name before training
starts, so a target that cannot be scored fails in one line before any long work.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from torch import nn

from adaptlab.data.encoding import TextEncoder
from adaptlab.data.label_match import align_labels
from adaptlab.data.loading import load_dataset
from adaptlab.data.types import Dataset
from adaptlab.engine.stack_swap import stack_swapped
from adaptlab.errors import DataError
from adaptlab.methods.adapt import active
from adaptlab.methods.manifest import adapter_folder
from adaptlab.records.transfer import ZeroShotScore, ZeroShotTarget
from adaptlab.runs.evaluation import evaluate
from adaptlab.tasks.registry import LABELLED


@dataclass(frozen=True)
class PreparedTarget:
    """A zero-shot target with its data set read and its labels numbered as the training data's."""

    target: ZeroShotTarget
    dataset: Dataset


def prepare_targets(targets: Sequence[ZeroShotTarget], trained_on: Dataset) -> list[PreparedTarget]:
    """Read every target and match its labels to `trained_on`'s; check swap folders exist."""
    prepared = []
    for target in targets:
        dataset = load_dataset(target.data, LABELLED, **target.data_options)
        if dataset.task != trained_on.task:
            raise DataError(
                f"zero-shot target {target.data} is a {dataset.task} data set, "
                f"{trained_on.name} a {trained_on.task} one"
            )
        aligned = align_labels(dataset, trained_on.label_names, trained_on.name)
        for _, folder in target.stack_swap:
            adapter_folder(folder)
        prepared.append(PreparedTarget(target, aligned))
    return prepared


def score_targets(
    model: nn.Module,
    encoder: TextEncoder,
    targets: Sequence[PreparedTarget],
    batch_size: int,
) -> tuple[ZeroShotScore, ...]:
    """The trained model on each target's test split, with its stack swaps made (and undone)."""
    scores = []
    for prepared in targets:
        dataset, target = prepared.dataset, prepared.target
        features = encoder.encode(dataset.splits["test"])
        with stack_swapped(model, target.stack_swap):
            ran = active(model)
            result = evaluate(
                model, encoder, features, dataset.task, dataset.label_names, batch_size
            )
        scores.append(
            ZeroShotScore(
                data=target.data,
                name=dataset.name,
                examples=len(features),
                loss=result.loss,
                metrics=result.metrics,
                composition=str(ran) if target.stack_swap else None,
            )
        )
    return tuple(scores)
