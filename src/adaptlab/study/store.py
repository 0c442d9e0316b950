"""The results store: one SQLite file holding one row per run, safe against crashes.

`ResultStore` is the store a study writes and readers read; its parts live beside it, one
idea a file: the tables (`store_schema`), opening the file (`store_connection`, `store_file`),
where a store may be written (`store_paths`), the rows it gives back (`store_rows`), and its
reads and writes of runs, sequences' stages and validations (`store_run_writes`,
`store_run_reads`, `store_stages`, `store_validations`). The `load_*` functions read a store
that must exist, for reports and commands that never write.
"""

from __future__ import annotations

import os
from typing import Any

from adaptlab.study.store_rows import StoredRun, StoredSequence
from adaptlab.study.store_run_reads import RunReads
from adaptlab.study.store_run_writes import RunWrites
from adaptlab.study.store_schema import SCHEMA_VERSION
from adaptlab.study.store_stages import StageRows
from adaptlab.study.store_validations import ValidationRows

__all__ = [
    "SCHEMA_VERSION",
    "ResultStore",
    "StoredRun",
    "StoredSequence",
    "load_records",
    "load_sequences",
    "load_unplanned",
    "load_validations",
]


class ResultStore(RunWrites, RunReads, StageRows, ValidationRows):
    """A results store at `path`; created unless `create` is False (then it must exist).

    `read_only` is for readers: where the store's folder cannot be written (so SQLite cannot
    make the files a WAL store needs), the store is then opened for reading only."""


def load_records(path: str | os.PathLike[str], *, planned_only: bool = False) -> list[StoredRun]:
    """The done runs of the store at `path` (which must exist), as `records()`."""
    with ResultStore(path, create=False, read_only=True) as store:
        return store.records(planned_only=planned_only)


def load_sequences(
    path: str | os.PathLike[str], *, planned_only: bool = False
) -> list[StoredSequence]:
    """The done sequences of the store at `path` (which must exist), as `sequences()`."""
    with ResultStore(path, create=False, read_only=True) as store:
        return store.sequences(planned_only=planned_only)


def load_unplanned(path: str | os.PathLike[str]) -> list[tuple[str, str, str]]:
    """The done runs no longer in their study's spec, of the store at `path`, as `unplanned()`."""
    with ResultStore(path, create=False, read_only=True) as store:
        return store.unplanned()


def load_validations(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The validations saved in the store at `path` (which must exist), as `validations()`."""
    with ResultStore(path, create=False, read_only=True) as store:
        return store.validations()
