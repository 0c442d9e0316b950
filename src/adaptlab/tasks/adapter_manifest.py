"""An adapter folder's manifest read with the tasks it names known.

The methods read a manifest knowing no tasks (`adaptlab.methods.manifest` checks that a task
is a name), so a reader that goes on to use a task reads the manifest here: every task it
names (its own, and a combined adapter's sources' and heads') must be registered, or the file
is refused as it is read, in one line naming it, the field and the tasks there are, rather
than where the task is first looked up.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from adaptlab.errors import AdapterFileError
from adaptlab.methods.manifest import MANIFEST, Manifest, adapter_folder, parse_manifest
from adaptlab.tasks.registry import TASKS, known_task


def read_adapter_manifest(folder: Path) -> Manifest:
    """`folder`'s manifest, every field checked (`parse_manifest`) and every task it names
    known; one line naming the file and the first unknown task."""
    manifest = parse_manifest(folder)
    for field, task in _named_tasks(manifest).items():
        if not known_task(task):
            raise AdapterFileError(
                f"{folder / MANIFEST}: {field} names unknown task {task!r}; known tasks: "
                f"{', '.join(TASKS.listed())}"
            )
    return manifest


def read_adapter_manifests(folders: Sequence[str | os.PathLike[str]]) -> list[Manifest]:
    """The manifests of adapter or run folders about to be combined, read as
    `read_adapter_manifest` reads one: a source naming an unknown task is refused in its own
    manifest, not in the combined folder it would make."""
    return [read_adapter_manifest(adapter_folder(folder)) for folder in folders]


def _named_tasks(manifest: Manifest) -> dict[str, str]:
    """Every task `manifest` names, by field: its own, its sources' and its heads'."""
    named = {"task": manifest.task} if manifest.task else {}
    sources = manifest.combined.sources if manifest.combined else ()
    for index, source in enumerate(sources):
        if source.task:
            named[f"combined.sources[{index}].task"] = source.task
    for name, head in (manifest.heads or {}).items():
        named[f"heads.{name}.task"] = head.task
    return named
