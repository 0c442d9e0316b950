"""Paths a user gives, checked before any work: inputs must be files (not folders), and outputs
must be writable, be files or folders as the command needs, never be a symbolic link, never
overlap an input of the same command, never start with a `~` no shell expanded nor go up out
of a folder that does not exist, and never replace anything that adaptlab did not write there
itself."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from adaptlab.errors import ConfigError, DataError

JSON_OUTPUT_LIMIT = 64 << 20
"""A JSON file larger than this is no output of adaptlab's (and is not read to find out)."""

Inputs = Sequence[tuple[Path, str]]
"""A command's input paths, each with its name for messages ("data file", "stacked adapter")."""


def input_file(path: Path, what: str) -> Path:
    """`path` if it exists and is not a folder (pipes and devices are fine)."""
    if path.is_dir():
        raise DataError(f"{what} {path} is a folder, not a file; give the file itself")
    if not path.exists():
        raise DataError(f"{what} {path} not found; check the path")
    return path


def nearest_existing(path: Path) -> Path:
    """`path` or its closest ancestor that exists (where a missing folder would be made)."""
    path = path.absolute()
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def write_denied(folder: Path) -> str | None:
    """Why no file can be created in `folder` (or the ancestor where it would be made); None
    when one can. Tried for real (a temporary file, gone at once), so permissions, read-only
    mounts and immutable folders all answer alike, for every user, root included."""
    existing = nearest_existing(folder)
    if not existing.is_dir():
        return f"{existing} is a file, not a folder"
    try:
        with tempfile.TemporaryFile(dir=existing):
            pass
    except OSError as error:
        return f"{existing}: {(error.strerror or type(error).__name__).lower()}"
    return None


def check_writable(folder: Path, what: str, fix: str = "choose a folder you can write to") -> None:
    """Fail unless files can be created in `folder` (see `write_denied`); `fix` ends the line."""
    reason = write_denied(folder)
    if reason is not None:
        raise ConfigError(f"cannot write {what} ({reason}); {fix}")


def check_not_link(path: Path, what: str) -> None:
    """Fail if `path` itself is a symbolic link (dangling or not): an output replaces what is at
    its path, so writing through a link would replace the link, not what it points to."""
    if path.is_symlink():
        raise ConfigError(
            f"{what} {path} is a symbolic link (to {os.readlink(path)}); give the real path"
        )


def check_output_path(path: Path, what: str) -> None:
    """Fail if `path` starts with `~` or `~user`, which only a shell expands (and not inside
    quotes: the output would go to a new folder named `~` here), or goes up (`..`) out of a
    folder that does not exist: no check can look through that folder, and writing would make
    it and land in the folder above, whatever that holds."""
    home = os.path.expanduser(path)
    if home != str(path):
        raise ConfigError(
            f"{what} {str(path)!r} starts with '~', which only a shell expands; give the path "
            f"itself ({home})"
        )
    for index, part in enumerate(path.parts):
        above = Path(*path.parts[:index])
        if part == ".." and index and not above.exists():
            raise ConfigError(
                f"{what} {str(path)!r} goes up ('..') out of {above}, which does not exist; "
                "give the path without '..'"
            )


def check_named(path: Path, what: str) -> None:
    """Fail unless `path` ends in a name of its own, not `.`, `..`, `/` or nothing: a folder
    written whole (a run, a sequence) is built beside its path and renamed into it, and what
    goes with it (a run's checkpoint folder) is named after it."""
    if path.name in ("", ".."):
        raise ConfigError(
            f"{what} {str(path)!r} ends in no name of its own; name what to write, e.g. runs/first"
        )


def check_apart(output: Path, what: str, inputs: Inputs) -> None:
    """Fail unless `output` is none of the command's `inputs`, lies inside none and holds none
    (compared after following links), so that writing it can change no input."""
    target = Path(os.path.realpath(output))
    for source, name in inputs:
        real = Path(os.path.realpath(source))
        if target == real:
            where = "is"
        elif real in target.parents:
            where = "is inside"
        elif target in real.parents:
            where = "holds"
        else:
            continue
        raise ConfigError(
            f"{what} {output} {where} the {name} {source}; an output never touches an input: "
            "give another path"
        )


def existing(paths: Sequence[tuple[str | Path | None, str]]) -> list[tuple[Path, str]]:
    """The (path, name) pairs whose path is given and exists here (names of built-ins and hub
    models are no paths)."""
    return [(Path(path), name) for path, name in paths if path and Path(path).expanduser().exists()]


def check_output_file(
    path: Path,
    what: str,
    *,
    replaceable: Callable[[Path], bool],
    inputs: Inputs = (),
) -> None:
    """Fail, before any work, unless `path` can take the output `what`: not a folder or a link,
    apart from the command's `inputs` (`check_apart`), writable, and either new or an earlier
    output of the same kind (`replaceable`), so that nothing else is ever overwritten."""
    check_output_path(path, what)
    check_not_link(path, what)
    if path.is_dir():
        raise ConfigError(f"{what} {path} is a folder; give a file name (inside it, say)")
    check_apart(path, what, inputs)
    if path.exists() and not replaceable(path):
        raise ConfigError(
            f"{path} exists and is not an earlier {what}; adaptlab replaces only its own "
            "outputs: remove it or give another file name"
        )
    check_writable(path.parent, what)


def check_output_folder(path: Path, what: str, inputs: Inputs = ()) -> None:
    """Fail, before any work, unless `path` is a folder (or can be made) that can be written,
    not a link, plain (`check_output_path`) and apart from the command's `inputs`
    (`check_apart`)."""
    check_output_path(path, what)
    check_not_link(path, what)
    if path.exists() and not path.is_dir():
        raise ConfigError(f"{what} {path} is a file; give a folder")
    check_apart(path, what, inputs)
    check_writable(path, what)


def check_new_folder(path: Path, what: str, inputs: Inputs = ()) -> None:
    """Fail, before any work, unless `path` is a folder to be made or an empty one (commands
    that write a folder without an overwrite rule never mix files into an existing one)."""
    check_output_folder(path, what, inputs)
    if path.is_dir() and any(path.iterdir()):
        raise ConfigError(
            f"{what} {path} exists and is not empty; give a new folder (or remove that one)"
        )


def check_own_folder(folder: Path, what: str, ours: Callable[[Path], bool]) -> None:
    """Fail if `folder` holds anything that `ours` does not know as an earlier output of the
    command: no command mixes its files into a folder it did not make unless it is empty."""
    if not folder.is_dir():
        return
    foreign = sorted(entry.name for entry in folder.iterdir() if not ours(entry))
    if foreign:
        raise ConfigError(
            f"{what} {folder} holds {listed(foreign)}, which adaptlab did not write there; give "
            "a new or empty folder"
        )


def has_prefix(path: Path, prefix: bytes) -> bool:
    """Whether the file at `path` starts with `prefix` (False when it cannot be read)."""
    try:
        with path.open("rb") as file:
            return file.read(len(prefix)) == prefix
    except OSError:
        return False


def json_with_key(path: Path, key: str) -> bool:
    """Whether `path` holds a JSON object with `key` (how earlier JSON outputs are known)."""
    try:
        if path.stat().st_size > JSON_OUTPUT_LIMIT:
            return False
        found = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(found, dict) and key in found


def listed(names: Sequence[str], most: int = 3) -> str:
    """A few names for a message: `a, b, c and 4 more`."""
    more = f" and {len(names) - most} more" if len(names) > most else ""
    return ", ".join(names[:most]) + more
