"""What a spec's data entry of a generative task (`causal-lm`, `sft`, `chat`) may say: its
options checked as a run checks them (`adaptlab.tasks.generative_settings`), its chat template
file read from the spec's folder, a source its task can read, and the options as a run's spec
keeps them, so a study's run and the same run trained by `adaptlab train` have one id. A data
entry and a sequence's stage are checked alike, when the spec loads."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields
from pathlib import Path
from typing import Any

from adaptlab.data.builtin import BUILTINS
from adaptlab.data.generative_builtins import generative_builtin_datasets, shape_refusal
from adaptlab.data.preference_builtins import PREFERENCE_SHAPES_HELD
from adaptlab.errors import ConfigError
from adaptlab.tasks.generative import GenerativeTask
from adaptlab.tasks.generative_facts import computed_metrics
from adaptlab.tasks.generative_settings import GENERATIVE_OPTIONS, GenerativeSettings
from adaptlab.tasks.grpo import GRPO_OPTIONS
from adaptlab.tasks.preference_settings import PREFERENCE_KEYS
from adaptlab.tasks.registry import get_task, task_names
from adaptlab.tasks.reward import CENTER_OPTION, RewardModel, RewardSettings
from adaptlab.tasks.unread_options import refuse_unread_by_task

_DEFAULTS = {each.name: each.default for each in fields(GenerativeSettings)}
TASK_OPTIONS = (*GENERATIVE_OPTIONS, *PREFERENCE_KEYS, *GRPO_OPTIONS, CENTER_OPTION)
"""The data options only a generative, preference, reward or GRPO task reads."""


def generative_task(task: str | None) -> GenerativeTask | None:
    """The generative task `task` names (None: no task, or one that is not generative)."""
    found = None if task is None else get_task(task)
    return found if isinstance(found, GenerativeTask) else None


def generative_tasks() -> list[str]:
    """The names of the generative tasks, in registry order."""
    return task_names(lambda task: isinstance(task, GenerativeTask))


def check_entry(source: str, options: Mapping[str, Any], folder: Path | None = None) -> None:
    """Refuse (ValueError, one line) options a data entry's task does not take, a generative
    built-in without a generative task, and a built-in its generative task cannot read; with
    `folder` (the spec's), a chat template that is no readable template file too (without it,
    `run_options` refuses one when the study is planned)."""
    if folder is not None:
        options = from_folder(options, folder)
    named = options.get("task")
    if named is not None and isinstance(get_task(named), RewardModel):
        _check_reward_entry(source, options)
        return
    task = generative_task(named)
    if task is None:
        given = [key for key in options if key in TASK_OPTIONS]
        if given:
            raise ValueError(
                f"{given[0]} is an option of the generative tasks "
                f"({', '.join(generative_tasks())}); give task: one of them, or drop it"
            )
        if source in PREFERENCE_SHAPES_HELD:
            raise ValueError(
                f"{source} is a built-in preference-family corpus; name the task that learns "
                f"it, e.g. {{{source}: {{task: dpo}}}}"
            )
        if source in generative_builtin_datasets():
            raise ValueError(
                f"{source} is a built-in generative corpus; name the task that learns it, "
                f"e.g. {{{source}: {{task: sft}}}} (prompt -> completion) or task: chat (messages)"
            )
        return
    try:
        settings = task.settings(options)
        refuse_unread_by_task(options, task, "run")
        if folder is not None:
            settings.template_text()  # refuses a bad file now
    except ConfigError as error:
        raise ValueError(f"{source}: {error}") from None
    if settings.metric is not None and settings.metric not in computed_metrics(task):
        raise ValueError(
            f"{source}: task {task.name} is not scored by {settings.metric!r}; pick one of "
            f"{', '.join(computed_metrics(task))}"
        )
    _check_source(source, task)


def _check_reward_entry(source: str, options: Mapping[str, Any]) -> None:
    """A reward model's entry: its options checked as its run checks them (its chat template
    file read), its source pairs."""
    task = get_task("reward")
    try:
        refuse_unread_by_task(options, task, "run")
        RewardSettings.of(options)
    except ConfigError as error:
        raise ValueError(f"{source}: {error}") from None
    held = PREFERENCE_SHAPES_HELD.get(source)
    elsewhere = source in BUILTINS or source in generative_builtin_datasets()
    if held not in (None, RewardModel.data_shape) or elsewhere:
        raise ValueError(
            f"{source} holds no preference pairs, which task reward reads; give pairs such as "
            "countries-qa-pairs"
        )


def _check_source(source: str, task: GenerativeTask) -> None:
    """A built-in that `task` cannot read is refused, naming what it can."""
    held = PREFERENCE_SHAPES_HELD.get(source)
    if held is not None and held != task.data_shape:
        readers = task_names(lambda each: getattr(each, "data_shape", None) == held)
        raise ValueError(
            f"{source} holds {held} data, which task {task.name} does not read; learn it with "
            f"task {' or '.join(readers) or 'none installed'}"
        )
    if source in BUILTINS and task.data_shape is not None:
        twin = f"{source}-instructions"
        instead = (
            f"use {twin}, its examples as instructions"
            if twin in generative_builtin_datasets()
            else "give a file of prompt -> completion pairs or chats"
        )
        raise ValueError(
            f"{source} is a labelled built-in, which task {task.name} cannot read; {instead}"
        )
    if source in generative_builtin_datasets() and task.data_shape is not None:
        refusal = shape_refusal(source, task.data_shape)
        if refusal is not None:
            raise ValueError(refusal)
    if source in generative_builtin_datasets() and task.data_shape is None:
        raise ValueError(
            f"{source} holds prompt -> completion pairs or chats, not plain text; learn it with "
            f"task sft or chat (task {task.name} reads documents)"
        )


def from_folder(options: Mapping[str, Any], folder: Path) -> dict[str, Any]:
    """`options` with a chat template's path made absolute, read from `folder` (the spec's)."""
    template = options.get("chat_template")
    if not isinstance(template, str) or not template.strip():
        return dict(options)
    return {**options, "chat_template": str((folder / Path(template).expanduser()).resolve())}


def run_options(options: Mapping[str, Any], base: Path) -> dict[str, Any]:
    """`options` (checked by `check_entry`) as a run's spec keeps them: a generative task's
    options at their defaults left out, `stop` a list and the chat template an absolute path
    read from `base` (the spec's folder), as `adaptlab train` records its options; a chat
    template that is no readable template file is refused (ConfigError) before any run."""
    options = from_folder(options, base)
    task = generative_task(options.get("task"))
    if task is None:
        return options
    settings = task.settings(options)
    settings.template_text()  # refuses a bad file now (a spec validated without its folder)
    kept = {key: value for key, value in options.items() if key not in GENERATIVE_OPTIONS}
    for key in GENERATIVE_OPTIONS:
        value = getattr(settings, key)
        if value != _DEFAULTS[key]:
            kept[key] = value
    if settings.stop:
        kept["stop"] = list(settings.stop)
    if settings.chat_template is not None:
        kept["chat_template"] = str(settings.chat_template)
    return kept
