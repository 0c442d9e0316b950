"""The stages of a classification sequence: each a labelled data set sampled to the sequence's
sizes (`sampled`: its test set capped stratified by label) and encoded for the model; the model
loaded with a head per stage (`StageHeads`); a stage readied with its own head, trained as a
`StageRun` and tested on its test set with its head."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn
from transformers import PreTrainedTokenizerBase

from adaptlab.continual.heads import StageHeads
from adaptlab.continual.labelled_run import StageData, StageRun
from adaptlab.continual.sequence_objective import SequenceSettings
from adaptlab.continual.stages import KeptAdapter
from adaptlab.data.encoding import TextEncoder
from adaptlab.data.subsample import cut_to_sizes
from adaptlab.data.types import Dataset
from adaptlab.engine.scale_model import prepare_base
from adaptlab.models.loading import load_model
from adaptlab.runs.evaluation import evaluate
from adaptlab.tasks.registry import get_task


class LabelledStages:
    """A classification sequence's model, heads and encoded stages (`SequenceStages`)."""

    kept = KeptAdapter()
    """Nothing but the adapter's tensors (no task of `adaptlab train`, no chat template)."""

    def __init__(
        self,
        model: nn.Module,
        heads: StageHeads,
        stages: Sequence[StageData],
        seed: int,
        eval_batch_size: int,
    ) -> None:
        self.model, self.heads, self.stages = model, heads, stages
        self.seed, self.eval_batch_size = seed, eval_batch_size

    @classmethod
    def load(
        cls, spec: SequenceSettings, datasets: Sequence[Dataset], device: torch.device
    ) -> LabelledStages:
        """`spec`'s model on `device` with a head per data set, and the data sets encoded."""
        seed = spec.train.seed
        loaded = load_model(
            spec.model, "single_label", label_names=datasets[0].label_names, seed=seed
        )
        model: nn.Module = loaded.model
        prepare_base(model, spec.scale, device)
        heads = StageHeads.install(model, [len(d.label_names) for d in datasets], seed)
        stages = [encode_stage(dataset, loaded.tokenizer, spec) for dataset in datasets]
        return cls(model, heads, stages, seed, spec.train.eval_batch_size)

    def dropped(self, stage: int) -> dict[str, int]:
        return {}

    def labels(self, stage: int) -> tuple[str, ...]:
        return self.stages[stage].label_names

    def ready(self, stage: int) -> None:
        self.heads.select(stage)
        self.heads.train_only(stage)

    def run(self, stage: int) -> StageRun:
        return StageRun(
            self.model, self.stages, stage, self.eval_batch_size, heads=self.heads, seed=self.seed
        )

    def test(self, stage: int) -> dict[str, float]:
        self.heads.select(stage)
        data = self.stages[stage]
        tested = evaluate(
            self.model,
            data.encoder,
            data.test,
            "single_label",
            data.label_names,
            self.eval_batch_size,
        )
        return {**tested.metrics, "loss": tested.loss}


def encode_stage(
    dataset: Dataset, tokenizer: PreTrainedTokenizerBase, spec: SequenceSettings
) -> StageData:
    """`dataset`'s splits encoded for the sequence's model and `max_length`."""
    encoder = TextEncoder(
        tokenizer,
        get_task("single_label"),
        len(dataset.label_names),
        spec.train.max_length,
    )
    splits = {name: encoder.encode(examples) for name, examples in dataset.splits.items()}
    return StageData(
        name=dataset.name,
        label_names=dataset.label_names,
        encoder=encoder,
        train=splits["train"],
        dev=splits["dev"],
        test=splits["test"],
    )


def sampled(dataset: Dataset, spec: SequenceSettings) -> Dataset:
    """`dataset` sampled to `train_size` training examples (as many for dev) and its test set
    capped to `test_size`, with the sequence's seed."""
    task = get_task(dataset.task)
    return cut_to_sizes(dataset, task, spec.train_size, spec.test_size, spec.train.seed)
