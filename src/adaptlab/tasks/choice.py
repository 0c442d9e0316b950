"""Which metric judges a method on a data set: the task's own choice (`Task.choose_metric`: its
primary metric, except where the task says otherwise, as single-label data with very unequal
classes does), or a metric asked for by name (a study's `metric:`), which always wins."""

from __future__ import annotations

from collections.abc import Mapping

from adaptlab.tasks.judging import MetricChoice
from adaptlab.tasks.registry import get_task


def choose_metric(
    task: str,
    train_counts: Mapping[str, int] | None,
    requested: str | None = None,
    requested_by: str = "`metric:` in the study spec",
) -> MetricChoice:
    """The metric judging runs of `task` trained on a sample with `train_counts` per class;
    `requested` (asked for by `requested_by`) wins over the task's own choice."""
    if requested is not None:
        return MetricChoice(requested, f"asked for by {requested_by}")
    return get_task(task).choose_metric(train_counts)
