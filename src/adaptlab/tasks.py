"""The kinds of task adaptlab trains, shared by the data, models and train layers."""

from typing import Literal, get_args

TaskKind = Literal["single_label", "multi_label", "token", "regression"]
TASK_KINDS: tuple[str, ...] = get_args(TaskKind)
