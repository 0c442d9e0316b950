"""Checks of the neurons commands' options and output folders, made before any work starts."""

from __future__ import annotations

import math
from collections.abc import Collection
from pathlib import Path

import adaptlab.paths as paths
from adaptlab.checks import at_least
from adaptlab.errors import ConfigError


def check_count(option: str, value: int | None, low: int = 1) -> None:
    """`value` is an integer of at least `low` (None passes: no limit)."""
    if value is not None:
        at_least(value, low, option)


def check_fraction(option: str, value: object) -> None:
    """`value` is a number from 0 to 1."""
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or not 0 <= value <= 1
    ):
        raise ConfigError(f"{option} must be a number from 0 to 1, got {value!r}")


def check_finite(option: str, value: object) -> None:
    """`value` is a finite number."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ConfigError(f"{option} must be a finite number, got {value!r}")


def check_kind(kind: str | None) -> None:
    """A language-model kind, or None (inferred from the model)."""
    if kind not in (None, "masked", "causal"):
        raise ConfigError(f"unknown language-model kind {kind!r}; choose masked or causal")


def check_output_folder(
    folder: Path,
    outputs: dict[str, tuple[str, ...]],
    option: str = "--out",
    *,
    own: Collection[str] = (),
    inputs: paths.Inputs = (),
) -> None:
    """`folder` can take the files named in `outputs`: it is a folder or can be made one that
    can be written, apart from the command's `inputs`, holding nothing but files named in `own`
    (what the neurons commands write), and each file is free or one adaptlab wrote before (a
    PNG; a JSON object with the keys `outputs` lists), which it then replaces."""
    paths.check_output_folder(folder, option)
    for name, keys in outputs.items():
        path = folder / name
        if path.exists() and not _written_by_us(path, keys):
            what = "a folder" if path.is_dir() else "a file adaptlab did not write"
            raise ConfigError(
                f"{option} {str(folder)!r} holds {what} named {name!r}; move it or choose "
                "another folder"
            )
    paths.check_apart(folder, option, inputs)
    paths.check_own_folder(folder, option, lambda entry: entry.name in own and entry.is_file())


_PNG = b"\x89PNG\r\n\x1a\n"


def _written_by_us(path: Path, keys: tuple[str, ...]) -> bool:
    """A file of ours: a PNG, or a JSON object holding `keys`."""
    if not path.is_file():
        return False
    if path.suffix == ".png":
        return paths.has_prefix(path, _PNG)
    return bool(keys) and all(paths.json_with_key(path, key) for key in keys)
