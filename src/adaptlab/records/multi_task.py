"""Multi-task runs: one adapter trained on several data sets at once, then scored on each.

A multi-task run trains on its spec's `data` and on each data set of `multi_task` together:
the union of their training samples (each cut to the run's `train_size` with the run's seed,
as a run on that data set alone would cut it), one head over the union of their labels, each
label named `<data set>:<label>` (`adaptlab.data.union`). Its dev and test splits are the
unions too. A run with `multi_task_adapter` trains nothing: it scores that adapter on its own
data set, where only that data set's labels compete (`adaptlab.engine.untrained_run`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from adaptlab.errors import ConfigError
from adaptlab.records.jsonfields import JsonObject


@dataclass(frozen=True)
class TaskData:
    """A data set a multi-task run trains on beside its spec's `data`, with its reading
    options."""

    data: str
    data_options: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.data, str) or not self.data:
            raise ConfigError(f"a multi-task run's data set must be named, got {self.data!r}")

    def to_dict(self) -> dict[str, Any]:
        return {"data": self.data, "data_options": dict(self.data_options)}

    @classmethod
    def from_json(cls, task: JsonObject) -> TaskData:
        task.refuse_unknown(("data", "data_options"))
        return cls(task.text("data"), dict(task.mapping("data_options", default={})))
