"""The labelled tasks (single- and multi-label classification, token tagging, regression) as
an objective of the epoch loop: the model's own loss on a batch of encoded examples, the best
epoch chosen by the task's primary dev metric (`Task.primary_metric`).

An example's tokens are the same every epoch, so training can replay the frozen front's
outputs after the first epoch where the running adapter allows it (`adaptlab.methods.frozen_cache`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

import torch
from torch import nn

from adaptlab.data.encoding import TextEncoder
from adaptlab.engine.batches import collated
from adaptlab.engine.history import TrainHistory
from adaptlab.engine.loop import train_epochs
from adaptlab.engine.objective import DevScore
from adaptlab.engine.scale_model import FLOAT32
from adaptlab.methods.frozen_cache import DEFAULT_MODE, FrozenCache
from adaptlab.records.config import TrainConfig
from adaptlab.records.scale import Scale
from adaptlab.runs.evaluation import evaluate
from adaptlab.tasks.registry import get_task

IndexedBatch = tuple[list[int], dict[str, torch.Tensor]]
"""A training batch: its examples' indices, and their padded tensors with the labels."""


class Classification:
    """Train on `train` (encoded by `encoder`), score each epoch on `dev` (`Objective`)."""

    title = ""

    def __init__(
        self,
        model: nn.Module,
        encoder: TextEncoder,
        train: Sequence[dict[str, Any]],
        dev: Sequence[dict[str, Any]],
        task: str,
        label_names: Sequence[str],
        eval_batch_size: int,
    ) -> None:
        self.model, self.encoder = model, encoder
        self.train_features, self.dev_features = train, dev
        self.task, self.label_names, self.eval_batch_size = task, label_names, eval_batch_size
        self.metric = get_task(task).primary_metric
        self.examples = len(train)
        self.device = next(model.parameters()).device
        self.cache: FrozenCache | None = None

    def batch(self, indices: list[int], generator: torch.Generator) -> IndexedBatch:
        return indices, collated(self.encoder, self.train_features, indices, self.device)

    def loss(self, batch: IndexedBatch) -> torch.Tensor:
        indices, tensors = batch
        cache = self.cache
        replay = cache.step(indices, tensors.get("attention_mask")) if cache else nullcontext()
        with replay:
            loss: torch.Tensor = self.model(**tensors).loss
        return loss

    def loss_terms(self, batch: IndexedBatch) -> int:
        """What the model's mean loss is over, as the task says (tagged tokens, examples), for
        data-parallel shares (`adaptlab.engine.data_parallel`)."""
        indices, tensors = batch
        return get_task(self.task).loss_terms(tensors["labels"], len(indices))

    def dev(self) -> DevScore:
        tested = evaluate(
            self.model,
            self.encoder,
            self.dev_features,
            self.task,
            self.label_names,
            self.eval_batch_size,
        )
        return DevScore(tested.loss, tested.metrics, tested.metrics[self.metric])

    @contextmanager
    def frozen_replay(self, mode: str, folder: Path | None) -> Iterator[None]:
        """While inside, training replays the frozen front's outputs after the first epoch.

        `mode` ("auto", "memory", "disk", "off"): see `FrozenCache.create`; on disk, its
        scratch files go in `folder` (a temporary folder when None) and are deleted on exit.
        """
        self.cache = FrozenCache.create(self.model, mode, self.train_features, folder)
        try:
            yield
        finally:
            if self.cache is not None:
                self.cache.close()
            self.cache = None


def train(
    model: nn.Module,
    encoder: TextEncoder,
    train_features: Sequence[dict[str, Any]],
    dev_features: Sequence[dict[str, Any]],
    task: str,
    label_names: Sequence[str],
    config: TrainConfig,
    learning_rate: float,
    *,
    scale: Scale = FLOAT32,
    progress: bool = True,
    frozen_cache: str = DEFAULT_MODE,
    cache_folder: Path | None = None,
) -> TrainHistory:
    """Train `model`'s trainable parameters on a labelled task at `scale` (the one `model` was
    prepared for by `engine.scale_model.prepare_base`); on return it holds the best epoch's
    weights. `frozen_cache` and `cache_folder`: see `Classification.frozen_replay`."""
    objective = Classification(
        model, encoder, train_features, dev_features, task, label_names, config.eval_batch_size
    )
    with objective.frozen_replay(frozen_cache, cache_folder):
        return train_epochs(model, objective, config, learning_rate, scale=scale, progress=progress)
