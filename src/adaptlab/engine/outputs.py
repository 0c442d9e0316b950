"""A run folder: what it holds, and when a run may be written to (or replace) a folder
(`adaptlab.folders`: a new or empty folder, or with `--overwrite` an earlier run folder)."""

from __future__ import annotations

from pathlib import Path

from adaptlab.folders import FolderKind, check_result_folder
from adaptlab.methods.manifest import MANIFEST
from adaptlab.paths import Inputs
from adaptlab.records.split_record import SPLITS_FILE

METRICS_FILE = "metrics.json"
LOG_FILE = "train.log"
ADAPTER_FOLDER = "adapter"
ANALYSIS_FOLDER = "analysis"
"""Where `adaptlab analyze` writes by default: inside the run (or adapter) folder analysed."""
HARNESS_FOLDER = "lm_eval"
"""Where `adaptlab eval --harness` writes lm-evaluation-harness results by default: inside the
run (or adapter) folder scored."""
RUN_ENTRIES = (ADAPTER_FOLDER, METRICS_FILE, LOG_FILE, SPLITS_FILE, ANALYSIS_FOLDER, HARNESS_FOLDER)


def is_run_folder(path: Path) -> bool:
    """Whether `path` is a run folder: metrics.json and adapter/ with its manifest."""
    return (path / METRICS_FILE).is_file() and (path / ADAPTER_FOLDER / MANIFEST).is_file()


RUN_FOLDER = FolderKind(
    "run", RUN_ENTRIES, "adapter/, metrics.json, splits.json, train.log", is_run_folder
)


def check_run_folder(out: Path, overwrite: bool, inputs: Inputs = ()) -> None:
    """Fail, before any work, unless a run may be written to `out` (see the module doc), which
    overlaps none of the run's `inputs`."""
    check_result_folder(out, overwrite, RUN_FOLDER, inputs)
