"""`kd-representation` and `kd-contrastive`: the model keeps the sentence representations it
had before the stage (representation and contrastive distillation, Jin et al. 2022, "Lifelong
Pretraining": h_{t-1} ~ h_t, and B_{t-1} ~ B_t over the batch's similarity matrix).

Both read, for the stage's own examples in a batch (replayed ones have no teacher), the
student's hidden states averaged over each example's real tokens, and compare them with the
teacher's, cached once per stage (`representations`):

- `kd-representation`: weight * mean over layers, rows and width of (s - t)^2, the mean squared
  error of the last block's output (`layers=last`, the default) or of every block's
  (`layers=all`);
- `kd-contrastive`: InfoNCE over the batch (van den Oord et al. 2018; as a teacher-student
  distillation, CoDIR, Sun et al. 2020): with s_i, t_j the L2-normalised last-block
  representations of rows i and j by the student and the teacher,
  weight * mean_i -log( exp(s_i . t_i / T) / sum_j exp(s_i . t_j / T) ): the teacher's view of
  the same example is the positive, its views of the batch's other examples the negatives.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import torch
import torch.nn.functional as F

from adaptlab.continual.labelled_run import HeadOutputs, HiddenStates, StageRun
from adaptlab.continual.registry import StrategyEntry, register_strategy
from adaptlab.continual.representations import (
    Layers,
    student_representations,
    teacher_representations,
)
from adaptlab.continual.stages import Row, own_rows
from adaptlab.continual.strategy import Strategy, StrategyConfig, check_number
from adaptlab.errors import ConfigError

LAYER_CHOICES = ("last", "all")


@dataclass(frozen=True)
class RepresentationDistillationConfig(StrategyConfig):
    """`weight` of the squared error; `layers`: "last" (the last block's output) or "all"."""

    name = "kd-representation"
    weight: float = 1.0
    layers: str = "last"

    def __post_init__(self) -> None:
        check_number(self.name, "weight", self.weight)
        if self.layers not in LAYER_CHOICES:
            raise ConfigError(
                f"kd-representation: layers must be one of {', '.join(LAYER_CHOICES)}, "
                f"got {self.layers!r}"
            )


@dataclass(frozen=True)
class ContrastiveDistillationConfig(StrategyConfig):
    """`weight` of the InfoNCE term; `temperature` T of the similarities (0.1)."""

    name = "kd-contrastive"
    weight: float = 1.0
    temperature: float = 0.1

    def __post_init__(self) -> None:
        check_number(self.name, "weight", self.weight)
        check_number(self.name, "temperature", self.temperature, positive=True)


class _CachedRepresentations(Strategy[StageRun, HeadOutputs]):
    """Caches the teacher's representations as a stage begins (from the second stage on) and
    pairs them with the student's for the stage's own rows of a batch."""

    hidden_states: ClassVar[bool] = True
    layers: Layers = "last"

    def __init__(self, config: StrategyConfig) -> None:
        super().__init__(config)
        self.teacher: torch.Tensor | None = None
        """(layers, examples, width): the teacher's pooled states of every training example of
        the stage in training; None in the first stage."""

    def begin(self, run: StageRun) -> None:
        self.teacher = teacher_representations(run, self.layers) if run.index else None

    def pairs(
        self, run: StageRun, rows: Sequence[Row], hidden: HiddenStates | None
    ) -> tuple[torch.Tensor, torch.Tensor] | None:
        """(student, teacher) representations, (layers, rows, width) each, of the stage's own
        rows; None when there is no teacher or no such row."""
        if self.teacher is None or hidden is None:
            return None
        positions, indices = own_rows(run, rows)
        if not positions:
            return None
        student = student_representations(hidden, self.layers, positions)
        teacher = self.teacher[:, indices].to(device=student.device, dtype=student.dtype)
        return student, teacher

    def penalty(
        self, run: StageRun, rows: Sequence[Row], outputs: HeadOutputs
    ) -> torch.Tensor | None:
        paired = self.pairs(run, rows, outputs.hidden)
        return None if paired is None else self.distance(*paired)

    def distance(self, student: torch.Tensor, teacher: torch.Tensor) -> torch.Tensor:
        """The weighted term between the student's and the teacher's representations."""
        raise NotImplementedError


class RepresentationDistillation(_CachedRepresentations):
    """Mean squared error between the student's and the teacher's representations."""

    config: RepresentationDistillationConfig

    def __init__(self, config: RepresentationDistillationConfig) -> None:
        super().__init__(config)
        self.layers = "all" if config.layers == "all" else "last"

    def distance(self, student: torch.Tensor, teacher: torch.Tensor) -> torch.Tensor:
        return self.config.weight * F.mse_loss(student, teacher)


class ContrastiveDistillation(_CachedRepresentations):
    """InfoNCE: each example's student representation picks out its own teacher
    representation among the batch's."""

    config: ContrastiveDistillationConfig

    def distance(self, student: torch.Tensor, teacher: torch.Tensor) -> torch.Tensor:
        return self.config.weight * info_nce(student[0], teacher[0], self.config.temperature)


def info_nce(student: torch.Tensor, teacher: torch.Tensor, temperature: float) -> torch.Tensor:
    """Mean over rows i of -log softmax_j(cos(student_i, teacher_j) / T) at j = i."""
    similarity = F.normalize(student, dim=-1) @ F.normalize(teacher, dim=-1).T / temperature
    return F.cross_entropy(similarity, torch.arange(len(student), device=student.device))


register_strategy(
    StrategyEntry(
        "kd-representation",
        RepresentationDistillationConfig,
        "hidden states kept close to the model's before the stage (MSE, cached teacher)",
        runs_on={"classification": RepresentationDistillation},
    )
)
register_strategy(
    StrategyEntry(
        "kd-contrastive",
        ContrastiveDistillationConfig,
        "InfoNCE between the student's and the teacher's representations of a batch",
        runs_on={"classification": ContrastiveDistillation},
    )
)
