"""adaptlab's cache folder, and publishing folders into it atomically."""

import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from adaptlab.errors import ConfigError
from adaptlab.paths import check_writable

STALE_AFTER_S = 3600.0
"""A temp folder this old is a crashed build's leftover, not another process's work in progress."""


def cache_dir() -> Path:
    """$ADAPTLAB_CACHE, else ~/.cache/adaptlab; created on demand."""
    root = os.environ.get("ADAPTLAB_CACHE")
    path = Path(root).expanduser() if root else Path.home() / ".cache" / "adaptlab"
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise ConfigError(
            f"cannot make adaptlab's cache folder {path} ({error.strerror}); set "
            "ADAPTLAB_CACHE to a folder you can write"
        ) from None
    return path


def model_cache_path(name: str) -> Path:
    """Where the materialised folder of built-in model `name` lives (it may not exist yet)."""
    return cache_dir() / "models" / name


def publish(target: Path, build: Callable[[Path], Path], action: str) -> Path:
    """Build a folder in a private temp dir, then rename it to `target`.

    Readers see either no `target` or a complete one, whatever crashes or runs concurrently.
    `build` gets an empty work dir and returns the folder in it to publish.
    """
    check_writable(
        target.parent, "adaptlab's cache", "set ADAPTLAB_CACHE to a folder you can write"
    )
    target.parent.mkdir(parents=True, exist_ok=True)
    _remove_stale_temps(target)
    print(f"{action} once into {target} ...", file=sys.stderr)
    work = Path(tempfile.mkdtemp(prefix=_temp_prefix(target), dir=target.parent))
    try:
        built = build(work)
        try:
            built.rename(target)
        except OSError:
            if not target.is_dir():
                raise
            # another process published the same folder first: keep theirs
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return target


def _temp_prefix(target: Path) -> str:
    """The name prefix of the temp dirs that build `target`."""
    return f".{target.name}.tmp-"


def _remove_stale_temps(target: Path) -> None:
    """Delete temp dirs that crashed builds of `target` left behind."""
    now = time.time()
    for leftover in target.parent.glob(_temp_prefix(target) + "*"):
        if now - leftover.stat().st_mtime > STALE_AFTER_S:
            shutil.rmtree(leftover, ignore_errors=True)
