"""What a run hands an analysis once it has trained (`adaptlab.runs.run.execute`'s
`on_trained`): the model, its tokenizer, the data it trained on encoded and how to batch it;
and the callback scoring a language model's run with lm-evaluation-harness (`on_trained_lm`).

A labelled run's examples are feature dicts its `TextEncoder` pads (`EncoderCollator`); a
decoder's are ids with labels marking the targets (`adaptlab.engine.packing.Encoded`), one a row
and right-padded (`DecoderCollator`): a causal model's tokens never attend to the padding after
them and keep the positions 0, 1, ... they trained at, so a batch gives each example's hidden
states exactly as it alone would, whatever padding side its tokenizer prefers."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import torch
from torch import nn

from adaptlab.data.encoding import TextEncoder
from adaptlab.data.types import Dataset
from adaptlab.engine.packing import Encoded, collate_padded
from adaptlab.records.harness import HarnessScores

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase


class Collator(Protocol):
    """Encoded examples into one batch of model inputs (no labels), padded on `padding_side`."""

    @property
    def padding_side(self) -> str: ...

    def collate(self, features: Sequence[Any]) -> dict[str, torch.Tensor]: ...


@dataclass(frozen=True)
class EncoderCollator:
    """A labelled run's feature dicts padded by its `TextEncoder` (their labels left out)."""

    encoder: TextEncoder

    @property
    def padding_side(self) -> str:
        return str(self.encoder.tokenizer.padding_side)

    def collate(self, features: Sequence[dict[str, Any]]) -> dict[str, torch.Tensor]:
        inputs = [{k: v for k, v in feature.items() if k != "labels"} for feature in features]
        return self.encoder.collate(inputs)


@dataclass(frozen=True)
class DecoderCollator:
    """A decoder's examples one a row, right-padded with `pad_id` (see the module docstring):
    `input_ids` and `attention_mask`."""

    pad_id: int
    padding_side: str = "right"

    def collate(self, features: Sequence[Encoded]) -> dict[str, torch.Tensor]:
        batch = collate_padded(features, self.pad_id)
        return {"input_ids": batch["input_ids"], "attention_mask": batch["attention_mask"]}


@dataclass(frozen=True)
class TrainedRun:
    """What `execute` hands its `on_trained` callback before the model is released: the model at
    its best epoch, still adapted (so `adaptlab.disabled` gives its base and the handle keeps
    the starting weights), its tokenizer, the run's task, every split encoded (`features`) and
    how to batch them (`collator`; None where the run's examples are not read layer by layer:
    an encoder-decoder's). A labelled run also gives its `TextEncoder` and data set, which
    its loss needs (`TrainedRun.labelled`)."""

    model: nn.Module
    tokenizer: PreTrainedTokenizerBase
    task: str
    features: Mapping[str, Sequence[Any]]
    collator: Collator | None
    encoder: TextEncoder | None = None
    dataset: Dataset | None = None

    @classmethod
    def labelled(
        cls,
        model: nn.Module,
        encoder: TextEncoder,
        dataset: Dataset,
        features: Mapping[str, Sequence[dict[str, Any]]],
    ) -> TrainedRun:
        """A labelled run's: its features batched by `encoder`."""
        return cls(
            model,
            encoder.tokenizer,
            dataset.task,
            features,
            EncoderCollator(encoder),
            encoder,
            dataset,
        )


OnTrained = Callable[[TrainedRun], Mapping[str, Any]]
"""A callback whose JSON-ready result is stored as the result's `analysis`."""

OnTrainedLm = Callable[[nn.Module], HarnessScores]
"""A callback scoring a language-model run's trained model (at its best epoch, still adapted)
with lm-evaluation-harness; its scores are stored as the result's `harness`."""
