"""Multi-task runs: one adapter trained on several data sets at once, then scored on each.

A multi-task run trains on its spec's `data` and on each data set of `multi_task` together:
the union of their training samples (each cut to the run's `train_size` with the run's seed,
as a run on that data set alone would cut it). Single-label data sets get one head over the
union of their labels, each label named `<data set>:<label>` (`adaptlab.data.union`); data
of one generative task (prompt -> completion pairs, chats) trains the language model on every
data set's rows, each encoded with its own options (`adaptlab.runs.generative_union`), the
options that apply to the union as a whole (`UNION_OPTIONS`) the same for all. Its dev and
test splits are the unions too. A run with `multi_task_adapter` trains nothing: it scores that
adapter on its own data set, where only that data set's labels compete, or with the data set's
own generative scoring (`adaptlab.runs.untrained_run`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any

from adaptlab.checks import shown
from adaptlab.data.union import SINGLE_LABEL
from adaptlab.errors import ConfigError
from adaptlab.records.jsonfields import JsonObject
from adaptlab.tasks.generative_settings import GenerativeSettings
from adaptlab.tasks.registry import get_task

UNION_OPTIONS = ("pack", "chat_template", "max_new_tokens", "stop", "metric")
"""The generative data options that apply to a multi-task run's union as a whole (how it is
packed, the one chat template its adapter keeps, how its dev split is scored): its data sets
give them alike."""
LANGUAGE_MODELS = ("causal_lm", "seq2seq_lm")
"""The model kinds of the generative tasks."""


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


def check_union(data: Sequence[tuple[str, Mapping[str, Any]]]) -> None:
    """The data sets of a multi-task run (source and reading options, the spec's `data`
    first) can be trained together: all single-label (their task given so or left to their
    labels), or all of one generative task giving the `UNION_OPTIONS` alike; otherwise one
    line naming the two data sets that cannot."""
    (first, options), rest = data[0], data[1:]
    first_task = _task(first, options.get("task"))
    for source, more in rest:
        task = _task(source, more.get("task"))
        if (first_task is None) != (task is None):
            kinds = [
                f"{name} {'is classification' if of is None else f'is {of} data'}"
                for name, of in ((first, first_task), (source, task))
            ]
            raise ConfigError(
                f"a multi-task run cannot mix classification and generative data: "
                f"{' and '.join(kinds)}; train them in separate studies or runs"
            )
        if task != first_task:
            raise ConfigError(
                f"a multi-task run trains one generative task: {first} is {first_task} data, "
                f"{source} is {task} data; give them the same task"
            )
    if first_task is None:
        return
    settings = _settings(first, options, first_task)
    for source, more in rest:
        theirs = _settings(source, more, first_task)
        for key in UNION_OPTIONS:
            mine, other = getattr(settings, key), getattr(theirs, key)
            if other != mine:
                raise ConfigError(
                    f"the data sets of a multi-task run give {key} alike (it applies to their "
                    f"union as a whole): {first} has {_plain(mine)}, {source} has "
                    f"{_plain(other)}; give them the same"
                )


def _task(source: str, task: object) -> str | None:
    """The generative task `source` is read for; None for single-label data (its task given
    so, or left to its labels); one line for any other task."""
    if task is None or task == SINGLE_LABEL:
        return None
    name = str(task)
    if get_task(name).model_kind not in LANGUAGE_MODELS:
        raise ConfigError(
            f"a multi-task run trains one head over single-label data sets or a language "
            f"model on generative data; task {name} is another ({source})"
        )
    return name


def _settings(source: str, options: Mapping[str, Any], task: str) -> GenerativeSettings:
    """`source`'s generative options, checked; one line naming it when one is wrong."""
    try:
        return GenerativeSettings.of(options, task)
    except ConfigError as error:
        raise ConfigError(f"{source}: {error}") from None


def _plain(value: object) -> str:
    """An option's value as a spec writes it: a path as text, stop strings as a list."""
    if isinstance(value, PurePath):
        return shown(str(value))
    return shown(list(value) if isinstance(value, tuple) else value)
