"""What prepares a run of each kind of task: a function that reads the run's data, loads its
model with the task's head on the run's device, attaches its adapters and hands back the run's
objective (`adaptlab.engine.run_objective.RunObjective`), which the engine trains and tests.

A task sits below the engine and does not know how its runs are prepared; `execute`
(`adaptlab.runs.run`) asks here with the task it was given. The preparer of a task is the one
registered for the nearest class of its method resolution order, so a plug-in task that
subclasses `LabelledTask` or `GenerativeTask` runs as they do, and one with runs of its own
registers its preparer with `prepares(ItsTask)` beside `register_task`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from adaptlab.errors import ConfigError
from adaptlab.registry import Registry

if TYPE_CHECKING:
    import torch

    from adaptlab.engine.run_objective import RunObjective
    from adaptlab.records.spec import RunSpec
    from adaptlab.tasks.task import Task

T = TypeVar("T", bound="Task")
R = TypeVar("R", bound="RunObjective")


@dataclass(frozen=True)
class Preparer:
    """What prepares the runs of `task_class` (and of its subclasses without one of their own):
    `prepare(task, spec, device)`, the task an instance of `task_class`."""

    task_class: type[Task]
    prepare: Callable[[Any, RunSpec, torch.device], RunObjective]

    @property
    def name(self) -> str:
        return class_name(self.task_class)


def class_name(cls: type) -> str:
    """The name a class's preparer is registered under: its module and qualified name."""
    return f"{cls.__module__}.{cls.__qualname__}"


PREPARERS: Registry[Preparer] = Registry(
    "run preparer",
    builtin={
        "adaptlab.tasks.labelled.LabelledTask": "adaptlab.runs.labelled_run",
        "adaptlab.tasks.generative.GenerativeTask": "adaptlab.runs.generative_run",
        "adaptlab.tasks.mlm.MaskedLanguageModelling": "adaptlab.runs.mlm_run",
        "adaptlab.tasks.preference.PreferenceTask": "adaptlab.runs.preference_run",
        "adaptlab.tasks.reward.RewardModel": "adaptlab.runs.reward_run",
        "adaptlab.tasks.kto.UnpairedPreference": "adaptlab.runs.kto_run",
        "adaptlab.tasks.grpo.GroupRelativePolicy": "adaptlab.runs.grpo_run",
    },
)
"""adaptlab's preparers (their modules imported when a run first asks) and any registered from
outside, each under the name of the task class it prepares."""


def prepares(
    task_class: type[T],
) -> Callable[[Callable[[T, RunSpec, torch.device], R]], Callable[[T, RunSpec, torch.device], R]]:
    """Register the decorated function as what prepares the runs of `task_class`'s tasks."""

    def register(
        prepare: Callable[[T, RunSpec, torch.device], R],
    ) -> Callable[[T, RunSpec, torch.device], R]:
        PREPARERS.register(Preparer(task_class, prepare))
        return prepare

    return register


def prepare_run(task: Task, spec: RunSpec, device: torch.device) -> RunObjective:
    """Read `spec`'s data, load and adapt its model on `device` as `task`'s preparer does: the
    run's objective; one line for a task no preparer prepares."""
    for cls in type(task).__mro__:
        if class_name(cls) in PREPARERS:
            return PREPARERS.get(class_name(cls)).prepare(task, spec, device)
    raise ConfigError(f"task {task.name} cannot be trained by a run")
