"""The kinds of task adaptlab trains, shared by the data, models and train layers."""

from typing import Literal, get_args

TaskKind = Literal["single_label", "multi_label", "token", "regression"]
TASK_KINDS: tuple[str, ...] = get_args(TaskKind)

MLM: Literal["mlm"] = "mlm"
"""Masked-language modelling on unlabelled text (a language adapter's task)."""
RunTaskKind = TaskKind | Literal["mlm"]
"""What a run trains for: a labelled task or masked-language modelling."""
RUN_TASK_KINDS: tuple[str, ...] = (*TASK_KINDS, MLM)
