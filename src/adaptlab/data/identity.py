"""What a data file holds, as a hash: a run records it, so a file edited in place after the run
is noticed (a path alone says nothing about the contents it had)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path

from adaptlab.data.builtin import BUILTINS
from adaptlab.data.files import EXTENSIONS

_CHUNK = 1 << 20


def content_digest(source: str) -> str | None:
    """SHA-256 of a data file's bytes, or of a split folder's data files (names and bytes);
    None for built-in corpora, hf: sources and paths that do not exist."""
    if source in BUILTINS or source.startswith("hf:"):
        return None
    path = Path(source).expanduser()
    if path.is_file():
        files = [path]
    elif path.is_dir():
        files = sorted(p for p in path.iterdir() if p.is_file() and p.suffix.lower() in EXTENSIONS)
    else:
        return None
    digest = hashlib.sha256()
    for file in files:
        if path.is_dir():
            digest.update(f"{file.name}\0{file.stat().st_size}\0".encode())
        with file.open("rb") as stream:
            while chunk := stream.read(_CHUNK):
                digest.update(chunk)
    return digest.hexdigest()


def joint_digest(digests: Sequence[str | None]) -> str | None:
    """One hash over the content digests of several data sources (a sequence's stages, a
    multi-task run's data sets); None when none has one (all built-in)."""
    if not any(digests):
        return None
    return hashlib.sha256(json.dumps(list(digests)).encode("utf-8")).hexdigest()
