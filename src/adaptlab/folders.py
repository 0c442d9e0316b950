"""Folders a command writes whole (a run, a sequence), and when one may be written or replaced.

Such a folder is written to a new or empty path. `--overwrite` replaces only an earlier folder
of the same kind, one that holds that kind's own files and nothing else, so no other folder (a
data folder, a home folder) can ever be deleted by mistake. The path ends in a name of its own
(not `.`, `..` or `/`), is never a symbolic link and never overlaps an input of the command
(`adaptlab.paths`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from adaptlab.errors import ConfigError
from adaptlab.paths import (
    Inputs,
    check_apart,
    check_named,
    check_not_link,
    check_output_path,
    check_writable,
    listed,
)


@dataclass(frozen=True)
class FolderKind:
    """A kind of whole-folder output: its noun ("run"), the entries an earlier one may hold,
    the ones named in messages, and how an earlier one is recognised."""

    noun: str
    entries: tuple[str, ...]
    shown: str
    is_earlier: Callable[[Path], bool]


def check_result_folder(out: Path, overwrite: bool, kind: FolderKind, inputs: Inputs = ()) -> None:
    """Fail, before any work, unless a `kind` folder may be written to `out` (module doc)."""
    check_output_path(out, "--out")
    check_named(out, "--out")
    check_not_link(out, "--out")
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out} is a file, not a folder; give a folder for the {kind.noun}")
    entries = sorted(entry.name for entry in out.iterdir()) if out.is_dir() else []
    earlier = bool(entries) and kind.is_earlier(out)
    if entries and not overwrite:
        hint = (
            f"it holds an earlier {kind.noun}: pass --overwrite to replace it, or give another "
            "--out"
            if earlier
            else f"give another --out (--overwrite replaces only an earlier {kind.noun} folder)"
        )
        raise ConfigError(f"output folder {out} exists and is not empty; {hint}")
    if entries:
        if not earlier:
            raise ConfigError(
                f"--overwrite replaces only an earlier {kind.noun} folder ({kind.shown}); {out} "
                f"is not one (it holds {listed(entries)}); give another --out"
            )
        others = [entry for entry in entries if entry not in kind.entries]
        if others:
            raise ConfigError(
                f"{out} holds an earlier {kind.noun} and also {listed(others)}, which "
                "--overwrite would delete; move them away or give another --out"
            )
        check_writable(out, f"the {kind.noun} folder")
    check_apart(out, "--out", inputs)
    check_writable(out.parent, f"the {kind.noun} folder")
