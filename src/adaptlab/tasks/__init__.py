"""Tasks: what a run trains for. Each is one registered object that owns what differs between
tasks (reading and parsing labels, stratifying splits, targets and batches, the loss's terms,
metrics and the judging metric, predictions, per-class counts, what a run refuses); see
`adaptlab.tasks.task.Task`. A new task is one file that registers itself (`register_task`).
Tasks sit below the engine: how a run of one is prepared with it is `adaptlab.runs`."""

from typing import TYPE_CHECKING

from adaptlab.lazy import lazy_face

if TYPE_CHECKING:
    from adaptlab.tasks.registry import TASKS, get_task, register_task, task_names
    from adaptlab.tasks.task import Task

__all__ = ["TASKS", "Task", "get_task", "register_task", "task_names"]

lazy_face(__name__)
