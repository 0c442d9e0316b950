"""File writing that never leaves half a file behind."""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import socket
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from adaptlab.processes import process_alive

if TYPE_CHECKING:
    from matplotlib.figure import Figure

STAGING_OWNER = ".adaptlab-owner"
"""Inside a staging folder until it is published: `host pid` of the process building it."""


def current_umask() -> int:
    """The process's file-creation mask (read without changing it for good)."""
    mask = os.umask(0)
    os.umask(mask)
    return mask


def save_png(fig: Figure, path: str | os.PathLike[str]) -> None:
    """Write the matplotlib figure `fig` as a PNG, atomically."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=120)
    atomic_write(Path(path), buffer.getvalue())


def atomic_write(path: Path, data: bytes) -> None:
    """Write via a temporary file in the same folder, then rename over `path`."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(data)
        os.chmod(tmp, 0o666 & ~current_umask())  # mkstemp makes 0600; give the usual mode
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def staging_folder(target: Path) -> Path:
    """A fresh hidden sibling of `target` to build it in, published by `publish_folder`.

    Leftovers of builds killed on this machine (kill -9, a power cut) in the same parent
    folder are removed first; a build still running (its process alive) is left alone."""
    target.parent.mkdir(parents=True, exist_ok=True)
    remove_dead_staging(target.parent)
    staging = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.partial-"))
    staging.chmod(0o777 & ~current_umask())
    (staging / STAGING_OWNER).write_text(f"{socket.gethostname()} {os.getpid()}\n")
    return staging


def publish_folder(staging: Path, target: Path) -> None:
    """Move a complete staging folder to `target`, replacing what was there."""
    (staging / STAGING_OWNER).unlink(missing_ok=True)
    if target.exists():
        shutil.rmtree(target)
    staging.rename(target)


def remove_dead_staging(parent: Path) -> list[Path]:
    """Delete the staging folders in `parent` whose builder died on this machine; return them.

    Folders of other machines (a shared disk) and of live processes stay."""
    removed = []
    for folder in parent.glob(".*.partial-*"):
        if folder.is_dir() and _builder_dead(folder / STAGING_OWNER):
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
    return removed


def _builder_dead(owner: Path) -> bool:
    """Whether the process named in a staging folder's owner file is gone from this machine."""
    try:
        host, pid = owner.read_text().split()
        return not process_alive(host, int(pid))
    except (OSError, ValueError):
        return False  # no readable owner file: not a staging folder of this version


def file_sha256(path: Path) -> str:
    """The SHA-256 hex digest of the file at `path`, read in chunks."""
    digest = hashlib.sha256()
    with path.open("rb") as file:
        for chunk in iter(lambda: file.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()
