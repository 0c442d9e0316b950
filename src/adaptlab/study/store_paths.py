"""Where a results store may be written, and the files beside it that belong to it."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

from adaptlab.errors import ConfigError
from adaptlab.paths import Inputs, check_apart, check_writable, has_prefix
from adaptlab.study.lock import lock_path
from adaptlab.study.store_connection import cannot_open, connect
from adaptlab.study.store_schema import SQLITE_HEADER, foreign_problem

SQLITE_SIDE_FILES = ("-wal", "-shm", "-journal")
"""Suffixes of the files SQLite keeps beside a store: its write-ahead log, the log's
shared-memory index and the rollback journal."""


def store_files(path: Path) -> list[tuple[Path, str]]:
    """The store and the files beside it that belong to it (SQLite's and `study run`'s lock),
    named for messages."""
    beside = [path.with_name(path.name + suffix) for suffix in SQLITE_SIDE_FILES]
    return [
        (path, "results store"),
        *((p, "results store's file") for p in [*beside, lock_path(path)]),
    ]


def check_store_path(path: Path, inputs: Inputs = ()) -> None:
    """Fail, before anything is created or locked, unless `path` can be a results store: an
    adaptlab store, or a new (or empty) file in a folder that can be written, apart from the
    study's `inputs` (`adaptlab.paths.check_apart`)."""
    if path.is_dir():
        raise ConfigError(f"{path} is a folder, not a results store (a .db file)")
    if path.exists() and path.stat().st_size:
        if not has_prefix(path, SQLITE_HEADER):
            raise ConfigError(f"{path} is not an adaptlab results store (not an SQLite file)")
        try:
            with closing(connect(path, read_only=True)) as db:
                problem = foreign_problem(db, path)
        except sqlite3.DatabaseError as error:  # a damaged file behind an SQLite header
            raise ConfigError(cannot_open(path, error)) from None
        if problem:
            raise ConfigError(problem)
    check_apart(path, "results store", inputs)
    check_writable(path.parent, "the results store")
