"""What a sequence's stages train for (its objective): one object registered by name
(`objectives`) holding everything that differs between objectives: the metric its matrix
holds and what its sizes count, which stages' data it takes, how a stage's data is read and
sampled, how the model is loaded and its stages built, whether the model must be a causal LM,
whether the trained adapter is kept with the sequence, and whether its stages take the
generative data options. Everything else (the stage pipeline and loop, the strategies,
records, studies, the report) asks the objective and never compares its name.

Defining an objective imports no torch, so records and reports read objectives freely; what
trains is imported when a sequence asks.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

if TYPE_CHECKING:
    import torch

    from adaptlab.continual.stages import SequenceStages
    from adaptlab.records.config import TrainConfig
    from adaptlab.records.scale import Scale
    from adaptlab.tasks.task import Task


NOT_IN_A_SEQUENCE = {
    "text_column": "it is read by causal-lm stages",
    "pack": "a sequence trains its stages in padded batches",
    "metric": "a sequence keeps each stage's epoch of lowest dev perplexity",
}
"""The generative data options of `adaptlab train` a sequence's stage does not take, and why."""


def stage_data_options(task: Task) -> tuple[str, ...]:
    """The data options a sequence's stage of `task` reads: the task's own, less those no
    sequence takes (`NOT_IN_A_SEQUENCE`)."""
    return tuple(option for option in task.data_options if option not in NOT_IN_A_SEQUENCE)


class SequenceSettings(Protocol):
    """What an objective reads of a sequence's spec (`SequenceSpec`)."""

    @property
    def model(self) -> str: ...

    @property
    def train(self) -> TrainConfig: ...

    @property
    def train_size(self) -> int | None: ...

    @property
    def test_size(self) -> int | None: ...

    @property
    def scale(self) -> Scale: ...


class SequenceObjective(ABC):
    """The base of every objective: its facts as class attributes, its behaviour as methods.
    A subclass sets the facts and implements how stages are read and loaded; one instance is
    registered (`objectives.register_objective`)."""

    name: ClassVar[str]
    """The name specs, studies and `--objective` use (stored with a sequence's spec)."""
    description: ClassVar[str]
    """What its stages are and how they are scored, in a few words (help text)."""
    metric: ClassVar[str]
    """What its matrix holds: every stage's score on every stage's test set."""
    unit: ClassVar[str]
    """What a stage's sizes (`train_size`, `test_size`) count."""
    needs_causal_lm: ClassVar[bool] = False
    """Whether the model must be a decoder-only causal LM: an encoder is refused before any
    work (`decoder.check_causal_lm`)."""
    keeps_adapter: ClassVar[bool] = False
    """Whether the adapter the last stage trained is kept in the sequence's folder."""
    generation_options: ClassVar[bool] = False
    """Whether its stages take the generative data options of `adaptlab train` (prompt and
    completion columns, the chat template, new tokens, ...)."""
    data_options: ClassVar[tuple[str, ...]] = ()
    """The data options (besides `task`) its stages read; any other is refused in one line
    (`adaptlab.tasks.unread_options`)."""

    def check_stage_task(self, source: str, task: str) -> None:
        """Refuse stage `source` whose data is of task `task`, when the objective cannot
        train on such a stage (also before loading, where a study knows the task); by default
        every task's data is taken."""
        return None

    @abstractmethod
    def read_stage(self, source: str, options: Mapping[str, Any], spec: SequenceSettings) -> Any:
        """Stage `source`'s data, read with `options` and sampled to `spec`'s sizes."""

    @abstractmethod
    def load_stages(
        self, spec: SequenceSettings, data: Sequence[Any], device: torch.device
    ) -> SequenceStages:
        """`spec`'s model loaded on `device`, and every stage's `data` (`read_stage`) made
        ready for it."""
