"""Every task by name. A task's module registers one `Task` (`register_task`); adaptlab's own are
imported when first looked up, so reading names (records, help text, the report) loads no
torch. Which tasks a command takes, and the guess of a data file's task, come from here."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from adaptlab.data.label_kind import LabelledTasks
from adaptlab.errors import ConfigError
from adaptlab.registry import Registry

if TYPE_CHECKING:
    from adaptlab.data.readers import RawRow
    from adaptlab.tasks.task import Task

TASKS: Registry[Task] = Registry(
    "task",
    builtin={
        "single_label": "adaptlab.tasks.single_label",
        "multi_label": "adaptlab.tasks.multi_label",
        "token": "adaptlab.tasks.token",
        "regression": "adaptlab.tasks.regression",
        "mlm": "adaptlab.tasks.mlm",
        "causal-lm": "adaptlab.tasks.causal_lm",
        "sft": "adaptlab.tasks.sft",
        "chat": "adaptlab.tasks.chat",
        "seq2seq": "adaptlab.tasks.seq2seq",
        "dpo": "adaptlab.tasks.dpo",
        "simpo": "adaptlab.tasks.simpo",
        "orpo": "adaptlab.tasks.orpo",
        "reward": "adaptlab.tasks.reward",
        "kto": "adaptlab.tasks.kto",
        "grpo": "adaptlab.tasks.grpo",
    },
)
"""adaptlab's tasks (listed first, in this order) and any registered from outside."""


def register_task(task: Task) -> Task:
    """Add `task` (an instance of a `Task` subclass) under its name; return it."""
    return TASKS.register(task)


def get_task(name: str) -> Task:
    """The task registered as `name`, or a one-line error listing the known ones."""
    return TASKS.get(name)


def known_task(name: object) -> bool:
    """Whether `name` names a task (built-in or registered)."""
    return isinstance(name, str) and name in TASKS


def task_names(where: Callable[[Task], bool] = lambda task: True) -> list[str]:
    """The names of the tasks for which `where` holds, in listing order."""
    return TASKS.names(where)


def run_task(name: str | None) -> Task:
    """The task of a run whose data options name `name`; None: the data's labels decide, and
    the runs of every labelled task are prepared alike, so the first one listed stands in."""
    if name is not None:
        return get_task(name)
    return get_task(task_names(lambda task: task.labelled)[0])


def labelled_task(name: str) -> Task:
    """The labelled task `name` (what `load_dataset` reads); one line naming those there are
    for an unknown name or an unlabelled task."""
    if known_task(name) and get_task(name).labelled:
        return get_task(name)
    labelled = task_names(lambda task: task.labelled)
    raise ConfigError(f"unknown task '{name}'; use one of {', '.join(labelled)}")


def guess_task(rows: Sequence[RawRow], separator: str) -> Task:
    """The task raw labelled `rows` look like: the first, in `guess_order`, that recognises
    them (word lists: token; label sets: multi_label; decimals: regression; else classes)."""
    guessing = sorted((t for t in TASKS if t.guess_order is not None), key=_guess_order)
    for task in guessing:
        if task.recognises(rows, separator):
            return task
    raise ConfigError("no task recognises these labels; give the task (--task)")


def _guess_order(task: Task) -> int:
    return task.guess_order or 0


LABELLED = LabelledTasks(named=labelled_task, guessed=guess_task)
"""The labelled tasks as the data layer below is handed them: `load_dataset(source, LABELLED)`."""


def known_metrics() -> list[str]:
    """Every metric some task judges by, in task order."""
    return list(dict.fromkeys(metric for task in TASKS for metric in task.metrics))
