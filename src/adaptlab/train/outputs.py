"""A run folder: what it holds, and when a run may be written to (or replace) a folder.

A run writes a new or empty folder. `--overwrite` replaces only an earlier run folder, one that
holds a run's own files and nothing else, so no other folder (a data folder, a home folder)
can ever be deleted by mistake.
"""

from __future__ import annotations

from pathlib import Path

from adaptlab.errors import ConfigError
from adaptlab.methods.persistence import MANIFEST
from adaptlab.paths import check_writable, listed

METRICS_FILE = "metrics.json"
LOG_FILE = "train.log"
ADAPTER_FOLDER = "adapter"
ANALYSIS_FOLDER = "analysis"
"""Where `adaptlab analyze` writes by default: inside the run (or adapter) folder analysed."""
RUN_ENTRIES = (ADAPTER_FOLDER, METRICS_FILE, LOG_FILE, ANALYSIS_FOLDER)


def is_run_folder(path: Path) -> bool:
    """Whether `path` is a run folder: metrics.json and adapter/ with its manifest."""
    return (path / METRICS_FILE).is_file() and (path / ADAPTER_FOLDER / MANIFEST).is_file()


def check_run_folder(out: Path, overwrite: bool) -> None:
    """Fail, before any work, unless a run may be written to `out` (see the module doc)."""
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out} is a file, not a folder; give a folder for the run")
    entries = sorted(entry.name for entry in out.iterdir()) if out.is_dir() else []
    if entries and not overwrite:
        hint = (
            "it holds an earlier run: pass --overwrite to replace it, or give another --out"
            if is_run_folder(out)
            else "give another --out (--overwrite replaces only an earlier run folder)"
        )
        raise ConfigError(f"output folder {out} exists and is not empty; {hint}")
    if entries:
        others = [entry for entry in entries if entry not in RUN_ENTRIES]
        if not is_run_folder(out):
            raise ConfigError(
                f"--overwrite replaces only an earlier run folder (adapter/, metrics.json, "
                f"train.log); {out} is not one (it holds {listed(entries)}); give another --out"
            )
        if others:
            raise ConfigError(
                f"{out} holds an earlier run and also {listed(others)}, which --overwrite would "
                "delete; move them away or give another --out"
            )
        check_writable(out, "the run folder")
    check_writable(out.parent, "the run folder")
