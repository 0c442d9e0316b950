"""The open results store file: created or upgraded to this schema, changed in transactions.

Every change is one `BEGIN IMMEDIATE` transaction in WAL mode: a writer killed at any moment
(kill -9 included) leaves the last committed state and never a partial row, and readers
(`status`, reports) read while a study writes. synchronous=NORMAL keeps every commit through a
process crash; a power cut may lose the last few commits (those runs simply run again) but
cannot corrupt the file.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Self

from adaptlab.errors import ConfigError
from adaptlab.paths import write_denied
from adaptlab.study.store_connection import cannot_open, connect
from adaptlab.study.store_paths import check_store_path
from adaptlab.study.store_schema import (
    SCHEMA,
    SCHEMA_VERSION,
    UPGRADES,
    foreign_problem,
    schema_version,
)


class StoreFile:
    """A results store at `path`, open; created unless `create` is False (then it must exist).

    `read_only` is for readers: where the store's folder cannot be written (so SQLite cannot
    make the files a WAL store needs), the store is then opened for reading only."""

    def __init__(
        self, path: str | os.PathLike[str], *, create: bool = True, read_only: bool = False
    ) -> None:
        self.path = Path(path)
        if self.path.is_dir():
            raise ConfigError(f"{self.path} is a folder, not a results store (a .db file)")
        if not create and not self.path.exists():
            raise ConfigError(
                f"no results store at {self.path}; `adaptlab study run SPEC` creates it"
            )
        if create:
            check_store_path(self.path)
            self.path.parent.mkdir(parents=True, exist_ok=True)
        reading = read_only and not create and write_denied(self.path.parent) is not None
        try:
            self._db = connect(self.path, reading)
        except sqlite3.DatabaseError as error:
            raise ConfigError(cannot_open(self.path, error)) from None
        try:
            if create:
                self._create()
            if not reading:
                self._upgrade()
            self._check_version()
        except sqlite3.DatabaseError as error:
            self._db.close()
            raise ConfigError(cannot_open(self.path, error)) from None
        except BaseException:
            self._db.close()
            raise

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection (a no-op when already closed)."""
        self._db.close()

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield self._db
        except BaseException:
            if self._db.in_transaction:
                self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    def _create(self) -> None:
        problem = foreign_problem(self._db, self.path)
        if problem:
            raise ConfigError(problem)
        self._db.execute("PRAGMA journal_mode = WAL")
        self._db.execute("PRAGMA synchronous = NORMAL")
        with self._transaction() as db:
            if schema_version(db) == 0:
                for statement in SCHEMA:
                    db.execute(statement)

    def _upgrade(self) -> None:
        """Bring an older store up to this schema, one version at a time."""
        version = schema_version(self._db)
        while version in UPGRADES:
            with self._transaction() as db:
                for statement in UPGRADES[version]:
                    db.execute(statement)
            version += 1

    def _check_version(self) -> None:
        version = schema_version(self._db)
        if version != SCHEMA_VERSION:
            raise ConfigError(
                f"{self.path} is not a results store of this adaptlab version "
                f"(schema {version}, expected {SCHEMA_VERSION})"
            )


def json_text(value: Any) -> str:
    """`value` as the compact JSON the store keeps in its text columns."""
    return json.dumps(value, separators=(",", ":"))


def utc_now() -> str:
    """Now, as the store writes times: UTC, ISO 8601 to the millisecond."""
    return datetime.now(UTC).isoformat(timespec="milliseconds")
