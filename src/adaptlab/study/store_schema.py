"""The results store's tables, their version, and the steps that bring an older store up to it.

Table `runs`: run_id (primary key), study, status ('running' | 'done' | 'failed'),
method_label, spec (the planned RunSpec as JSON), record (the run's `RunResult` as JSON, NULL
until done), error, started_at / finished_at (UTC, ISO 8601), host, pid. Table `planned`
holds each study's grid (study, run_id, position, method_label, spec) so `status` can count
the runs still to do. Table `studies` holds each study's `metric:` (NULL: the default rule).
Table `validations` holds what `adaptlab rank --validate` found for this
store's runs (data, kind: 'models' | 'layers', result JSON, created_at), one row per data set
and kind, for the report. A sequence of a sequence study is a row of `runs` and `planned` with
its `strategy_label` set (NULL for single runs), its spec a `SequenceSpec` and its record a
`SequenceResult`; table `stages` holds each of its finished stages (run_id, stage, record: the
stage's training record and row of the matrix, finished_at) as it finishes.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

SCHEMA_VERSION = 5
SQLITE_HEADER = b"SQLite format 3\x00"

_VALIDATIONS = """CREATE TABLE validations (
        data TEXT NOT NULL,
        kind TEXT NOT NULL CHECK (kind IN ('models', 'layers')),
        result TEXT NOT NULL,
        created_at TEXT NOT NULL,
        PRIMARY KEY (data, kind)
    )"""

_STUDIES = """CREATE TABLE studies (
        study TEXT PRIMARY KEY,
        metric TEXT
    )"""

_STAGES = """CREATE TABLE stages (
        run_id TEXT NOT NULL,
        stage INTEGER NOT NULL,
        record TEXT NOT NULL,
        finished_at TEXT NOT NULL,
        PRIMARY KEY (run_id, stage)
    )"""

SCHEMA = (
    """CREATE TABLE runs (
        run_id TEXT PRIMARY KEY,
        study TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('running', 'done', 'failed')),
        method_label TEXT NOT NULL,
        spec TEXT NOT NULL,
        record TEXT,
        error TEXT,
        started_at TEXT NOT NULL,
        finished_at TEXT,
        host TEXT NOT NULL,
        pid INTEGER NOT NULL,
        data_digest TEXT,
        strategy_label TEXT
    )""",
    """CREATE TABLE planned (
        study TEXT NOT NULL,
        run_id TEXT NOT NULL,
        position INTEGER NOT NULL,
        method_label TEXT NOT NULL,
        spec TEXT NOT NULL,
        strategy_label TEXT,
        PRIMARY KEY (study, run_id)
    )""",
    _VALIDATIONS,
    _STUDIES,
    _STAGES,
    f"PRAGMA user_version = {SCHEMA_VERSION}",
)
"""Statements that make a new, empty store of this schema version."""

UPGRADES = {
    1: (_VALIDATIONS, "PRAGMA user_version = 2"),
    2: ("ALTER TABLE runs ADD COLUMN data_digest TEXT", "PRAGMA user_version = 3"),
    3: (_STUDIES, "PRAGMA user_version = 4"),
    4: (
        "ALTER TABLE runs ADD COLUMN strategy_label TEXT",
        "ALTER TABLE planned ADD COLUMN strategy_label TEXT",
        _STAGES,
        "PRAGMA user_version = 5",
    ),
}
"""Statements that bring a store of schema version N to N + 1 (additive: old rows stay)."""


def schema_version(db: sqlite3.Connection) -> int:
    """The schema version the SQLite file behind `db` records (0: none, a new or foreign file)."""
    version: int = db.execute("PRAGMA user_version").fetchone()[0]
    return version


def foreign_problem(db: sqlite3.Connection, path: Path) -> str | None:
    """Why the SQLite file behind `db` is no store this version may use, or None."""
    version = schema_version(db)
    tables = db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
    if version == 0 and tables:
        return f"{path} is an SQLite database of another program, not an adaptlab results store"
    if version > SCHEMA_VERSION:
        return (
            f"{path} is a results store of a newer adaptlab (schema {version}, this one reads "
            f"{SCHEMA_VERSION}); upgrade adaptlab"
        )
    return None
