"""The paths a run reads, so that its output can be kept apart from them."""

from __future__ import annotations

from pathlib import Path

from adaptlab.paths import existing
from adaptlab.records.spec import RunSpec


def run_inputs(spec: RunSpec) -> list[tuple[Path, str]]:
    """The run's base model folder, data files and adapter folders that exist on this machine
    (built-in and hub names are no paths), each named for messages."""
    named: list[tuple[str | Path, str]] = [(spec.model, "base model"), (spec.data, "data")]
    named += [(folder, "stacked adapter") for folder in spec.stack]
    named += [(folder, "fused adapter") for folder in spec.fuse]
    named += [(task.data, "data") for task in spec.multi_task]
    if spec.combine is not None:
        named += [(source.folder, "combined adapter") for source in spec.combine.sources]
    if spec.multi_task_adapter is not None:
        named.append((spec.multi_task_adapter, "multi-task adapter"))
    for target in spec.zero_shot:
        named.append((target.data, "zero-shot data"))
        named += [(folder, "swapped-in adapter") for _, folder in target.stack_swap]
    return existing(named)
