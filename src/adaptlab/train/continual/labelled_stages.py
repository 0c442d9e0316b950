"""The stages of a classification sequence as `train_sequence` takes them: one model with a
head per stage (`StageHeads`), every stage's data set encoded, the strategy; a stage trained
with its own head (`train_stage`) and tested on each stage's test set with that stage's head."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch
from torch import nn
from transformers import PreTrainedTokenizerBase

from adaptlab.data import Dataset, TextEncoder
from adaptlab.models.loading import load_model
from adaptlab.tasks.evaluation import evaluate
from adaptlab.train.config import TrainConfig
from adaptlab.train.continual.heads import StageHeads
from adaptlab.train.continual.registry import make_strategy
from adaptlab.train.continual.spec import SequenceSpec
from adaptlab.train.continual.stage_loop import train_stage
from adaptlab.train.continual.stages import StageData, StageRun
from adaptlab.train.continual.strategy import Strategy
from adaptlab.train.history import TrainHistory
from adaptlab.train.scale_model import prepare_base


class LabelledStages:
    """A classification sequence's model, heads, encoded stages and strategy (`SequenceStages`)."""

    def __init__(
        self,
        model: nn.Module,
        heads: StageHeads,
        stages: Sequence[StageData],
        strategy: Strategy,
        spec: SequenceSpec,
    ) -> None:
        self.model, self.heads, self.stages, self.strategy = model, heads, stages, strategy
        self.seed, self.eval_batch_size = spec.train.seed, spec.train.eval_batch_size

    @classmethod
    def load(
        cls, spec: SequenceSpec, datasets: Sequence[Dataset], device: torch.device
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
        return cls(model, heads, stages, make_strategy(spec.strategy), spec)

    def adapter_name(self, stage: int) -> str:
        return self.strategy.adapter_name(stage)

    def labels(self, stage: int) -> tuple[str, ...]:
        return self.stages[stage].label_names

    def ready(self, stage: int) -> None:
        self.heads.select(stage)
        self.heads.train_only(stage)

    def resume(self, carried: Mapping[str, torch.Tensor]) -> None:
        self.strategy.load_state(self.model, carried)

    def train(
        self, stage: int, config: TrainConfig, learning_rate: float, progress: bool
    ) -> TrainHistory:
        run = StageRun(self.model, self.heads, self.stages, stage, self.seed, self.eval_batch_size)
        self.strategy.begin(run)
        return train_stage(run, self.strategy, config, learning_rate, progress=progress)

    def test(self, stage: int, trained: int) -> dict[str, float]:
        self.strategy.route(self.model, stage, trained)
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

    def state(self) -> dict[str, torch.Tensor]:
        return self.strategy.state()


def encode_stage(
    dataset: Dataset, tokenizer: PreTrainedTokenizerBase, spec: SequenceSpec
) -> StageData:
    """`dataset`'s splits encoded for the sequence's model and `max_length`."""
    encoder = TextEncoder(
        tokenizer,
        "single_label",
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
