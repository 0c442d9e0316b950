"""What the code that trains and scores a generative task reads of it (`GenerativeFacts`), and
the names of the scores of target tokens: kept apart from the task classes
(`adaptlab.tasks.generative`), which import the run lazily."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from adaptlab.models.loading import ModelKind

PERPLEXITY = "perplexity"
"""The exponential of the mean cross-entropy per target token (lower is better)."""
TOKEN_ACCURACY = "token_accuracy"
"""The share of target tokens the model's most likely next token gets right."""


class GenerativeFacts(Protocol):
    """A generative task's facts (`adaptlab.tasks.generative.GenerativeTask`'s)."""

    @property
    def name(self) -> str: ...

    @property
    def model_kind(self) -> ModelKind: ...

    @property
    def primary_metric(self) -> str: ...

    @property
    def metrics(self) -> tuple[str, ...]: ...

    @property
    def data_shape(self) -> str | None:
        """How its data files are read; None: plain documents."""
        ...

    @property
    def generates(self) -> bool:
        """Whether dev and test generate answers to score."""
        ...


def computed_metrics(task: GenerativeFacts) -> tuple[str, ...]:
    """What a run of `task` scores its dev and test splits by: the perplexity and token
    accuracy of the targets, and the generative metrics where it generates."""
    return tuple(dict.fromkeys((PERPLEXITY, TOKEN_ACCURACY, *task.metrics)))
