"""The objective options a run trained with, for `adaptlab eval` of its adapter: a DPO run's
`--beta` and `--loss`, SimPO's gamma, KTO's weights, a reward model's centring. Scoring an
adapter of a run folder with another beta would report other rewards and margins than the run
did, so the options not given on the command line are the run's (its `metrics.json`); an
adapter folder outside a run has no record, and takes the options' defaults."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

from adaptlab.engine.outputs import ADAPTER_FOLDER, METRICS_FILE, is_run_folder
from adaptlab.errors import ConfigError
from adaptlab.records.result import read_result
from adaptlab.tasks.preference import PreferenceTask
from adaptlab.tasks.preference_settings import PreferenceSettings
from adaptlab.tasks.reward import RewardModel, RewardSettings
from adaptlab.tasks.task import Task


def run_of_adapter(adapter: Path) -> Path | None:
    """The run folder `adapter` (a run folder, or the adapter folder inside one) belongs to."""
    if is_run_folder(adapter):
        return adapter
    if adapter.name == ADAPTER_FOLDER and is_run_folder(adapter.parent):
        return adapter.parent
    return None


def recorded_options(
    adapter: Path, task: Task | None, names: Collection[str], given: Mapping[str, Any]
) -> dict[str, Any]:
    """`given` with each option of `names` it lacks taken from the run `adapter` belongs to
    (none where it belongs to no run, or the run did not set it); values `task`'s settings
    refuse are refused naming the run's file."""
    run = run_of_adapter(adapter)
    if run is None:
        return dict(given)
    record = run / METRICS_FILE
    trained = read_result(record).spec.data_options
    kept = {name: trained[name] for name in names if name in trained and name not in given}
    try:
        if isinstance(task, PreferenceTask):
            PreferenceSettings.of({"task": task.name, **kept}, task)
        elif isinstance(task, RewardModel):
            RewardSettings.of(kept)
    except ConfigError as error:
        raise ConfigError(f"{record}: {error}") from None
    return {**kept, **given}
