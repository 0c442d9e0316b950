"""What the labelled tasks share: examples read by `load_dataset` with one label each, the
model's own loss and head (a run of one is prepared by `adaptlab.runs.labelled_run`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from adaptlab.errors import DataError
from adaptlab.tasks.task import Task

if TYPE_CHECKING:
    from adaptlab.data.readers import RawRow


class LabelledTask(Task):
    """A task on labelled texts (or word lists) with a head the model's loss trains."""

    labelled: ClassVar[bool] = True
    data_options: ClassVar[tuple[str, ...]] = (
        "text_column",
        "text_pair_column",
        "label_column",
        "label_separator",
        "split",
        "time_column",
    )


def sentence_label(row: RawRow, sets: bool = False) -> str | tuple[str, ...]:
    """A sentence-level row's raw label: refuses word lists (a token task's) and, unless
    `sets`, label lists (a multi-label task's)."""
    if isinstance(row.text, tuple):
        raise DataError(f"{row.where} gives a list of words; use task 'token' for word lists")
    if isinstance(row.label, tuple) and not sets:
        raise DataError(
            f"{row.where} gives a list of labels; use task 'multi_label' for label sets"
        )
    return row.label
