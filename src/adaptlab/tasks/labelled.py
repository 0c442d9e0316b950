"""What the labelled tasks share: examples read by `load_dataset` with one label each, the
model's own loss and head, and a run prepared by `adaptlab.tasks.labelled_run`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from adaptlab.errors import ConfigError, DataError
from adaptlab.tasks.generative_settings import GENERATIVE_OPTIONS
from adaptlab.tasks.task import Task

if TYPE_CHECKING:
    import torch

    from adaptlab.data.readers import RawRow
    from adaptlab.engine.run_objective import RunObjective
    from adaptlab.records.spec import RunSpec


class LabelledTask(Task):
    """A task on labelled texts (or word lists) with a head the model's loss trains."""

    labelled: ClassVar[bool] = True

    def prepare_run(self, spec: RunSpec, device: torch.device) -> RunObjective:
        from adaptlab.tasks.labelled_run import prepare_classification

        return prepare_classification(spec, device)

    def check_data_options(self, options: Mapping[str, Any]) -> None:
        """Refuse the generative tasks' options (`--pack`, `--prompt-column`, ...)."""
        given = [key for key in GENERATIVE_OPTIONS if key in options]
        if given:
            option = "--" + given[0].replace("_", "-")
            raise ConfigError(
                f"{option} is an option of the generative tasks (causal-lm, sft, chat); "
                "pass --task with one of them, or drop it"
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
