"""What every stage of a sequence has, whatever its objective (a labelled data set, a corpus,
prompt -> answer examples): its name and splits; the stage in training, as every strategy's
hooks and the stage loop read it (`StageRun`, `TextStageRun`); a sequence's stages as its
objective loaded them, as the stage pipeline drives them; and the adapter each stage trains and
what the kept one records."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from adaptlab.methods.adapt import add_adapter, list_adapters, train_adapter

if TYPE_CHECKING:
    import torch
    from torch import nn

    from adaptlab.engine.objective import DevScore
    from adaptlab.methods.config import MethodConfig

Row = tuple[int, int]
"""A training example of the sequence: (stage, index into that stage's training features)."""

OutputsT_co = TypeVar("OutputsT_co", covariant=True)
StageT = TypeVar("StageT")


class StageSplits(Protocol):
    """A stage's name and its train, dev and test examples, however encoded."""

    @property
    def name(self) -> str: ...

    @property
    def train(self) -> Sequence[Any]: ...

    @property
    def dev(self) -> Sequence[Any]: ...

    @property
    def test(self) -> Sequence[Any]: ...


class StageInTraining(Protocol[OutputsT_co]):
    """Stage `index` of `stages` being trained on `model` (`StageRun`, `TextStageRun`): what
    every strategy hook reads, and what the stage loop asks of it. `OutputsT_co` is what its
    forward pass gives a strategy's penalty."""

    @property
    def model(self) -> nn.Module: ...

    @property
    def stages(self) -> Sequence[StageSplits]: ...

    @property
    def index(self) -> int: ...

    @property
    def metric(self) -> str:
        """The dev metric that picks the stage's best epoch."""
        ...

    def forward(self, rows: Sequence[Row], hidden_states: bool) -> tuple[torch.Tensor, OutputsT_co]:
        """The mean loss of a batch of `rows`, each scored as its own stage's, and what the
        forward pass gives a strategy's penalty (with the student's hidden states where the
        strategy asks for them: `hidden_states`)."""
        ...

    def loss_terms(self, rows: Sequence[Row]) -> int:
        """What the batch's mean loss is a mean over (data-parallel shares weigh by it)."""
        ...

    def dev(self) -> DevScore:
        """The model's score on the stage's dev set, as it is now."""
        ...


@dataclass(frozen=True)
class RunningStage(Generic[StageT]):
    """Stage `index` of `stages` being trained on `model`, evaluated in batches of
    `eval_batch_size`: what every stage in training holds (`StageRun` and `TextStageRun` add
    what their objective's stages need)."""

    model: nn.Module
    stages: Sequence[StageT]
    index: int
    eval_batch_size: int

    @property
    def stage(self) -> StageT:
        return self.stages[self.index]


@dataclass(frozen=True)
class KeptAdapter:
    """What the manifest of a sequence's kept adapter records besides its tensors: the task
    its stages are data of (as `adaptlab train` records it) and the chat template they were
    rendered with (`adaptlab serve` renders chats with it); None where there is none."""

    task: str | None = None
    chat_template: str | None = None


class SequenceStages(Protocol):
    """A sequence's model and stages as its objective loaded them (`LabelledStages`,
    `CorpusStages`, `AnswerStages`): what the stage pipeline asks of them."""

    @property
    def model(self) -> nn.Module: ...

    @property
    def stages(self) -> Sequence[StageSplits]: ...

    @property
    def kept(self) -> KeptAdapter:
        """What the kept adapter's manifest records (where the objective keeps it)."""
        ...

    def dropped(self, stage: int) -> dict[str, int]:
        """Per split, the examples of stage `stage` left out because their answer does not fit
        (empty where the objective leaves none out)."""
        ...

    def labels(self, stage: int) -> tuple[str, ...]:
        """Stage `stage`'s label names, as its record keeps them."""
        ...

    def ready(self, stage: int) -> None:
        """Make stage `stage`'s own parts (a head) the ones that run and train."""
        ...

    def run(self, stage: int) -> StageInTraining[Any]:
        """Stage `stage` about to be trained."""
        ...

    def test(self, stage: int) -> dict[str, float]:
        """Every test metric and the mean test loss on stage `stage`, the model as it is."""
        ...


def own_rows(run: StageInTraining[Any], rows: Sequence[Row]) -> tuple[list[int], list[int]]:
    """The positions in `rows` of the training stage's own examples (not replayed ones), and
    their indices into its training set."""
    positions = [position for position, (stage, _) in enumerate(rows) if stage == run.index]
    return positions, [rows[position][1] for position in positions]


def use_stage_adapter(
    model: nn.Module, name: str, methods: Sequence[MethodConfig], seed: int
) -> None:
    """Add adapter `name` of `methods` (if new, initialised from `seed`) and make it the one
    that trains."""
    if name not in list_adapters(model):
        add_adapter(model, name, methods, train_head=False, seed=seed)
    train_adapter(model, name)
