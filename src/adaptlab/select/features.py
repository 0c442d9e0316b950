"""Hidden states of every layer, pooled per example: what the estimators score.

Extraction runs once per model, data sample, pooling and length, batched with a progress bar;
the result is cached on disk (see `cache`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, get_args

import numpy as np
import torch

from adaptlab.data.encoding import TextEncoder
from adaptlab.data.subsample import low_resource
from adaptlab.data.types import Dataset, Example
from adaptlab.errors import ConfigError
from adaptlab.models.loading import LoadedModel
from adaptlab.progress import track
from adaptlab.tasks.registry import get_task, task_names

Pooling = Literal["mean", "first"]
POOLINGS: tuple[str, ...] = get_args(Pooling)


@dataclass(frozen=True)
class LayerFeatures:
    """`hidden[l]` holds the pooled features of layer l (0: embeddings) for every example."""

    hidden: np.ndarray  # layers + 1 x n x d, float32
    labels: np.ndarray  # n class ids (int64) or targets (float64)

    @property
    def layer_count(self) -> int:
        """Transformer blocks (the embedding output is layer 0 and not counted)."""
        return self.hidden.shape[0] - 1


def sample_examples(dataset: Dataset, sample: int | None, seed: int) -> tuple[Example, ...]:
    """`sample` training examples, stratified and drawn as a study's training set with `seed`
    is (He et al. 2021 protocol, `low_resource`); all of them when `sample` is None or larger."""
    task = get_task(dataset.task)
    if not (task.one_class_each or task.one_number_each):
        fits = task_names(lambda kind: kind.one_class_each or kind.one_number_each)
        raise ConfigError(
            f"ranking needs one class or one number per example ({', '.join(fits)} data); "
            f"{dataset.name} is {dataset.task}"
        )
    train = dataset.splits["train"]
    if sample is None or sample >= len(train):
        return tuple(train)
    return low_resource(dataset, task, sample, seed).splits["train"]


def labels_of(examples: Sequence[Example], task: str) -> np.ndarray:
    """Class ids (int64) or numbers (float64, for a task of one number each) of the examples."""
    dtype = np.float64 if get_task(task).one_number_each else np.int64
    return np.asarray([example.label for example in examples], dtype=dtype)


def extract(
    loaded: LoadedModel,
    examples: Sequence[Example],
    dataset: Dataset,
    *,
    pooling: Pooling = "mean",
    batch_size: int = 32,
    max_length: int = 128,
    progress: bool = True,
) -> LayerFeatures:
    """Pooled hidden states of all layers for `examples`, computed in batches without gradients.

    Batches group examples of similar length (sorted by token count), so little padding is
    computed; the rows come back in the order of `examples`.
    """
    if pooling not in POOLINGS:
        raise ConfigError(f"unknown pooling {pooling!r}; choose one of {', '.join(POOLINGS)}")
    if batch_size < 1:
        raise ConfigError(f"batch_size must be at least 1, got {batch_size}")
    task = get_task(dataset.task)
    encoder = TextEncoder(loaded.tokenizer, task, len(dataset.label_names), max_length)
    encoded = encoder.encode(examples)
    order = sorted(range(len(encoded)), key=lambda i: len(encoded[i]["input_ids"]))
    model = loaded.model.eval()
    device = model.device
    chunks: list[torch.Tensor] = []
    batches = range(0, len(order), batch_size)
    bar = track(batches, f"features {loaded.model_id}", "batch", enabled=progress)
    with torch.inference_mode():
        for start in bar:
            batch = encoder.collate([encoded[i] for i in order[start : start + batch_size]])
            batch.pop("labels", None)
            batch = {name: tensor.to(device) for name, tensor in batch.items()}
            out = model(**batch, output_hidden_states=True)
            states = torch.stack(out.hidden_states)
            chunks.append(pool(states, batch["attention_mask"], pooling).cpu())
    by_length = torch.cat(chunks, dim=1)
    hidden = torch.empty_like(by_length)
    hidden[:, order] = by_length
    return LayerFeatures(hidden=hidden.float().numpy(), labels=labels_of(examples, dataset.task))


def pool(states: torch.Tensor, mask: torch.Tensor, pooling: Pooling) -> torch.Tensor:
    """layers x batch x tokens x d -> layers x batch x d: mean over real tokens, or the first
    real token (position 0 with right padding, the first unmasked one with left padding)."""
    weights = mask.to(states.dtype)
    if pooling == "first":
        first = mask.float().argmax(dim=1)
        weights = torch.nn.functional.one_hot(first, mask.shape[1]).to(states.dtype)
    weights = weights / weights.sum(dim=1, keepdim=True).clamp(min=1.0)
    return torch.einsum("lbtd,bt->lbd", states, weights)
