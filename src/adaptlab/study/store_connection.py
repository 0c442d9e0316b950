"""Opening the results store's SQLite file: for writing, or for reading where nothing may be
written beside it, and one clear line when SQLite cannot open it."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from adaptlab.paths import write_denied


def connect(path: Path, read_only: bool) -> sqlite3.Connection:
    """A connection in autocommit mode. A read-only one also opens a WAL store in a folder that
    cannot be written (where SQLite cannot make its -shm file): the file is then read as it
    stands, as nothing can be writing to it there."""
    if not read_only:
        return sqlite3.connect(path, timeout=30.0, isolation_level=None)
    uri = path.absolute().as_uri()
    try:
        db = sqlite3.connect(f"{uri}?mode=ro", uri=True, timeout=30.0, isolation_level=None)
        db.execute("PRAGMA user_version")  # connecting is lazy: open the file now
        return db
    except sqlite3.OperationalError:
        if write_denied(path.parent) is None:
            raise
        return sqlite3.connect(f"{uri}?immutable=1", uri=True, isolation_level=None)


def cannot_open(path: Path, error: sqlite3.DatabaseError) -> str:
    """One line for an SQLite error on opening `path`."""
    if isinstance(error, sqlite3.OperationalError):
        return f"cannot open results store {path} ({error}); check that you may read it"
    return f"{path} is not an adaptlab results store ({error})"
