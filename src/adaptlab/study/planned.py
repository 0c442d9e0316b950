"""What `study run`, its executors and its store ask of a planned item, a run
(`planner.PlannedRun`) or a sequence (`sequence_plan.PlannedSequence`), and the outcome of
executing one. Both are plain data, so an item travels to a Ray worker and back as it is."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, Protocol, Self, TypeVar

from adaptlab.continual.result import SequenceResult, StageOutcome
from adaptlab.records.config import TrainConfig
from adaptlab.records.result import RunResult

if TYPE_CHECKING:
    from adaptlab.integrations.trackers.choice import Tracking

R = TypeVar("R", bound=RunResult | SequenceResult)
"""What an item's execution gives: a run's `RunResult` or a sequence's `SequenceResult`."""

StageDone = Callable[[int, StageOutcome], None]
"""Called with each stage an item finishes (its index from 0): a sequence's stages."""


class PlannedSpec(Protocol):
    """What the runner reads of an item's resolved spec (`RunSpec`, `SequenceSpec`)."""

    @property
    def model(self) -> str: ...

    @property
    def train_size(self) -> int | None: ...

    @property
    def train(self) -> TrainConfig: ...

    @property
    def device(self) -> str: ...

    def learning_rate(self) -> float: ...

    def to_dict(self) -> dict[str, Any]: ...


def cell_line(first: str, spec: PlannedSpec) -> str:
    """An item's short human line: `first` (what its cell varies), then its size, seed,
    learning rate and model."""
    size = "all" if spec.train_size is None else f"{spec.train_size:,}"
    return (
        f"{first} · {size} ex · seed {spec.train.seed} · lr {spec.learning_rate():g} · "
        f"{Path(spec.model).name}"
    )


def cell_tags(spec: PlannedSpec, **varies: str) -> dict[str, str]:
    """An item's tracker tags: its model, what its cell varies (`varies`), its train size,
    seed and learning rate."""
    return {
        "model": Path(spec.model).name,
        **varies,
        "size": "all" if spec.train_size is None else str(spec.train_size),
        "seed": str(spec.train.seed),
        "learning_rate": f"{spec.learning_rate():g}",
    }


class Planned(Protocol[R]):
    """A run or a sequence of a study: its stable id, labels, spec and data hash, the trackers
    it reports to, the items it builds on, and how it executes."""

    @property
    def run_id(self) -> str: ...

    @property
    def study(self) -> str: ...

    @property
    def method_label(self) -> str: ...

    @property
    def strategy_label(self) -> str | None:
        """A sequence's strategy label (None: a run)."""

    @property
    def label(self) -> str:
        """What status lines and reports call the item's arm."""

    @property
    def spec(self) -> PlannedSpec: ...

    @property
    def data_digest(self) -> str | None:
        """A hash of the data the item trains on (None: only built-ins)."""

    @property
    def needs(self) -> tuple[str, ...]:
        """The ids of the items whose folders this one builds on."""

    @property
    def tracking(self) -> Tracking | None: ...

    def describe(self) -> str:
        """A short human line naming the item's place in the grid."""

    def tracking_tags(self) -> dict[str, str]:
        """What the item's cell of the grid varies, as its tracker tags."""

    def inputs(self) -> list[tuple[Path, str]]:
        """The files and folders the item reads that exist here, each named for messages."""

    def placed(self, folders: Path, tracking: Tracking | None = None) -> Self:
        """The item with its folders under `folders` (beside the store) and its tracking."""

    def execute(self, progress: bool, on_stage: StageDone | None = None) -> Outcome[R]:
        """Train the item in this process; `on_stage` hears of each stage it finishes."""


@dataclass(frozen=True)
class Outcome(Generic[R]):
    """A finished item: its result, or the one-line error it failed with; seconds it took
    in this session."""

    run: Planned[R]
    result: R | None
    error: str | None
    seconds: float
