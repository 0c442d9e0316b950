"""The task of a trained adapter, read from its manifest before any model loads, and the options
of `adaptlab eval` and `adaptlab predict` checked against it: an option the adapter's task does
not read is refused in one line (`adaptlab.tasks.unread_options`), and so is a --task that is
not the adapter's."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from adaptlab.errors import ConfigError
from adaptlab.methods.combined_heads import require_head
from adaptlab.methods.manifest import adapter_folder
from adaptlab.tasks.adapter_manifest import read_adapter_manifest
from adaptlab.tasks.registry import get_task
from adaptlab.tasks.task import Task
from adaptlab.tasks.unread_options import described, refuse_unread_by_task

ADAPTER = "adapter"
"""What has the task an option is checked against, in refusals."""


def adapter_task(adapter: Path, head: str | None) -> Task | None:
    """The task of `adapter` (an adapter or run folder; of the source `head` names for an
    adapter combined from several), None where the manifest names none."""
    folder = adapter_folder(adapter)
    manifest = read_adapter_manifest(folder)
    chosen = require_head(manifest, folder, head)
    named = chosen.task if chosen is not None else manifest.task
    return get_task(named) if named else None


def check_adapter_options(given: Iterable[str], task: Task, asked: str | None = None) -> None:
    """Refuse --task `asked` when it is not the adapter's `task` (the manifest decides what
    the adapter is), then any option of `given` that `task` does not read."""
    if asked is not None and asked != task.name:
        raise ConfigError(
            f"--task {asked} is not this adapter's task: it is {described(task.name, ADAPTER)} "
            "(its manifest says so); drop --task"
        )
    refuse_unread_by_task(given, task, ADAPTER)
