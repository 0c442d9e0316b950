"""The results store: one SQLite file holding one row per run, safe against crashes.

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

Every change is one `BEGIN IMMEDIATE` transaction in WAL mode: a writer killed at any moment
(kill -9 included) leaves the last committed state and never a partial row, and readers
(`status`, reports) read while a study writes. synchronous=NORMAL keeps every commit through a
process crash; a power cut may lose the last few commits (those runs simply run again) but
cannot corrupt the file. Only the `study run` holding the store's lock
file writes (see `lock.py`).
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import closing, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any

from adaptlab.errors import ConfigError
from adaptlab.paths import Inputs, check_apart, check_writable, has_prefix, write_denied
from adaptlab.study.lock import lock_path
from adaptlab.study.planner import PlannedRun
from adaptlab.study.sequence_plan import PlannedSequence
from adaptlab.train.continual.result import SequenceResult, StageOutcome
from adaptlab.train.result import RunResult

SCHEMA_VERSION = 5
SQLITE_HEADER = b"SQLite format 3\x00"
VALIDATION_KINDS = ("models", "layers")

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

_SCHEMA = (
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

_UPGRADES = {
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


@dataclass(frozen=True)
class PlanRow:
    """A planned run and where it stands: status None means not started yet."""

    study: str
    run_id: str
    method_label: str
    status: str | None
    started_at: datetime | None
    finished_at: datetime | None
    host: str | None
    pid: int | None
    error: str | None
    data: str | None = None
    """The data source the plan names (a path for data files)."""
    data_digest: str | None = None
    """The hash of the data contents the run trained on, when it ran (None: not recorded)."""
    strategy_label: str | None = None
    """A sequence's strategy label (None: a single run)."""
    stages: int = 0
    """A sequence's stages (0: a single run)."""
    stages_done: int = 0
    """How many of them the store holds as finished."""

    @property
    def label(self) -> str:
        """The method label, with the strategy's for a sequence: `houlsby · replay`."""
        if self.strategy_label is None:
            return self.method_label
        return f"{self.method_label} · {self.strategy_label}"


@dataclass(frozen=True)
class StoredRun:
    """A done run as the store holds it: its result, the study and method label it ran as,
    and the metric its study's spec asked to judge by (None: the default rule)."""

    run_id: str
    study: str
    method_label: str
    result: RunResult
    study_metric: str | None = None


@dataclass(frozen=True)
class StoredSequence:
    """A done sequence as the store holds it: its result and the labels it ran as."""

    run_id: str
    study: str
    method_label: str
    strategy_label: str
    result: SequenceResult


Planned = PlannedRun | PlannedSequence


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
        with closing(_connect(path, read_only=True)) as db:
            problem = _foreign(db, path)
        if problem:
            raise ConfigError(problem)
    check_apart(path, "results store", inputs)
    check_writable(path.parent, "the results store")


class ResultStore:
    """A results store at `path`; created unless `create` is False (then it must exist).

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
            self._db = _connect(self.path, reading)
        except sqlite3.DatabaseError as error:
            raise ConfigError(_cannot_open(self.path, error)) from None
        try:
            if create:
                self._create()
            if not reading:
                self._upgrade()
            self._check_version()
        except sqlite3.DatabaseError as error:
            self._db.close()
            raise ConfigError(_cannot_open(self.path, error)) from None
        except BaseException:
            self._db.close()
            raise

    def __enter__(self) -> ResultStore:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection (a no-op when already closed)."""
        self._db.close()

    def set_plan(self, study: str, runs: Sequence[Planned], metric: str | None = None) -> None:
        """Replace `study`'s planned grid with `runs`, in their order, and its `metric:`."""
        with self._transaction() as db:
            db.execute("INSERT OR REPLACE INTO studies VALUES (?, ?)", (study, metric))
            db.execute("DELETE FROM planned WHERE study = ?", (study,))
            db.executemany(
                """INSERT INTO planned (study, run_id, position, method_label, spec,
                                        strategy_label)
                   VALUES (?, ?, ?, ?, ?, ?)""",
                [
                    (
                        study,
                        run.run_id,
                        position,
                        run.method_label,
                        _json(run.spec.to_dict()),
                        _strategy_label(run),
                    )
                    for position, run in enumerate(runs)
                ],
            )

    def statuses(self) -> dict[str, str]:
        """run_id -> status of every run ever started in this store."""
        return dict(self._db.execute("SELECT run_id, status FROM runs").fetchall())

    def start(self, run: Planned) -> None:
        """Mark `run` running (again, if it failed or was interrupted); a done run stays done."""
        with self._transaction() as db:
            db.execute(
                """INSERT INTO runs (run_id, study, status, method_label, spec, started_at,
                                     host, pid, data_digest, strategy_label)
                   VALUES (?, ?, 'running', ?, ?, ?, ?, ?, ?, ?)
                   ON CONFLICT (run_id) DO UPDATE SET
                       study = excluded.study, status = 'running',
                       method_label = excluded.method_label, spec = excluded.spec,
                       record = NULL, error = NULL, started_at = excluded.started_at,
                       finished_at = NULL, host = excluded.host, pid = excluded.pid,
                       data_digest = excluded.data_digest,
                       strategy_label = excluded.strategy_label
                   WHERE runs.status != 'done'""",
                (
                    run.run_id,
                    run.study,
                    run.method_label,
                    _json(run.spec.to_dict()),
                    _now(),
                    socket.gethostname(),
                    os.getpid(),
                    run.data_digest,
                    _strategy_label(run),
                ),
            )

    def data_digests(self) -> dict[str, str | None]:
        """run_id -> the hash of the data contents each done run trained on (None: unknown)."""
        rows = self._db.execute("SELECT run_id, data_digest FROM runs WHERE status = 'done'")
        return dict(rows.fetchall())

    def reopen(self, run_id: str, why: str) -> None:
        """Mark a done run failed (`why`), so the next start runs it again."""
        with self._transaction() as db:
            db.execute(
                "UPDATE runs SET status = 'failed', error = ? WHERE run_id = ?", (why, run_id)
            )

    def finish(self, run_id: str, result: RunResult) -> None:
        """Store a finished run's result and mark it done."""
        self._end(run_id, "done", _json(result.to_dict()), None)

    def finish_sequence(self, run_id: str, result: SequenceResult) -> None:
        """Store a finished sequence's result and mark it done."""
        self._end(run_id, "done", _json(result.to_dict()), None)

    def save_stage(self, run_id: str, stage: int, outcome: StageOutcome) -> None:
        """Keep a sequence's finished stage (replacing one of a run that started again)."""
        with self._transaction() as db:
            db.execute(
                "INSERT OR REPLACE INTO stages VALUES (?, ?, ?, ?)",
                (run_id, stage, _json(outcome.to_dict()), _now()),
            )

    def keep_stages(self, run_id: str, outcomes: Sequence[StageOutcome]) -> None:
        """Make the store's stages of `run_id` the finished `outcomes` a sequence resumes
        from: stages it has keep their rows (and times), missing ones are added, later ones
        (of an attempt whose state was not kept) are removed."""
        with self._transaction() as db:
            db.execute(
                "DELETE FROM stages WHERE run_id = ? AND stage >= ?", (run_id, len(outcomes))
            )
            db.executemany(
                "INSERT OR IGNORE INTO stages VALUES (?, ?, ?, ?)",
                [
                    (run_id, stage, _json(outcome.to_dict()), _now())
                    for stage, outcome in enumerate(outcomes)
                ],
            )

    def stages(self, run_id: str) -> list[tuple[StageOutcome, datetime]]:
        """A sequence's finished stages in order, each with the time it finished."""
        rows = self._db.execute(
            "SELECT stage, record, finished_at FROM stages WHERE run_id = ? ORDER BY stage",
            (run_id,),
        ).fetchall()
        where = f"{self.path}: run {run_id}"
        return [
            (
                StageOutcome.from_dict(json.loads(record), f"{where}: stage {stage}"),
                datetime.fromisoformat(finished),
            )
            for stage, record, finished in rows
        ]

    def fail(self, run_id: str, error: str) -> None:
        """Mark a run failed with its one-line error; the next `study run` retries it."""
        self._end(run_id, "failed", None, error)

    def records(self, *, planned_only: bool = False) -> list[StoredRun]:
        """The done runs in plan order; runs no longer in any plan come last, oldest first, or
        with `planned_only` are left out (as `study status` and `study report` do; `unplanned`
        names them).

        A row whose result does not read (a field missing or of the wrong type) is a
        ConfigError naming the store, the run and the field.
        """
        rows = self._db.execute(
            f"""SELECT r.run_id, r.study, r.method_label, r.record, s.metric FROM runs r
               LEFT JOIN planned p ON p.study = r.study AND p.run_id = r.run_id
               LEFT JOIN studies s ON s.study = r.study
               WHERE r.status = 'done' AND r.strategy_label IS NULL
                     {"AND p.run_id IS NOT NULL" if planned_only else ""}
               ORDER BY p.position IS NULL, r.study, p.position, r.finished_at, r.run_id"""
        ).fetchall()
        return [
            StoredRun(run_id, study, label, self._result(run_id, record), metric)
            for run_id, study, label, record, metric in rows
        ]

    def sequences(self, *, planned_only: bool = False) -> list[StoredSequence]:
        """The done sequences in plan order, as `records()` orders runs."""
        rows = self._db.execute(
            f"""SELECT r.run_id, r.study, r.method_label, r.strategy_label, r.record FROM runs r
               LEFT JOIN planned p ON p.study = r.study AND p.run_id = r.run_id
               WHERE r.status = 'done' AND r.strategy_label IS NOT NULL
                     {"AND p.run_id IS NOT NULL" if planned_only else ""}
               ORDER BY p.position IS NULL, r.study, p.position, r.finished_at, r.run_id"""
        ).fetchall()
        return [
            StoredSequence(
                run_id,
                study,
                method,
                strategy,
                SequenceResult.from_dict(
                    self._parsed(run_id, record), f"{self.path}: run {run_id}"
                ),
            )
            for run_id, study, method, strategy, record in rows
        ]

    def _result(self, run_id: str, record: str) -> RunResult:
        return RunResult.from_dict(self._parsed(run_id, record), f"{self.path}: run {run_id}")

    def _parsed(self, run_id: str, record: str) -> Any:
        try:
            return json.loads(record)
        except json.JSONDecodeError as error:
            raise ConfigError(
                f"{self.path}: run {run_id}: its result is not JSON ({error})"
            ) from None

    def plan_rows(self) -> list[PlanRow]:
        """Every planned run of every study in the store, in plan order, with its status."""
        rows = self._db.execute(
            """SELECT p.study, p.run_id, p.method_label, r.status, r.started_at,
                      r.finished_at, r.host, r.pid, r.error, p.spec, r.data_digest,
                      p.strategy_label,
                      (SELECT count(*) FROM stages s WHERE s.run_id = p.run_id)
               FROM planned AS p LEFT JOIN runs AS r USING (run_id)
               ORDER BY p.study, p.position"""
        ).fetchall()
        plan = []
        for row in rows:
            study, run_id, label, status, started, finished, host, pid, error = row[:9]
            spec, digest, strategy, stages_done = row[9:]
            planned = json.loads(spec)
            plan.append(
                PlanRow(
                    study,
                    run_id,
                    label,
                    status,
                    _time(started),
                    _time(finished),
                    host,
                    pid,
                    error,
                    planned.get("data"),
                    digest,
                    strategy,
                    len(planned.get("stages", [])) if strategy is not None else 0,
                    stages_done,
                )
            )
        return plan

    def unplanned(self) -> list[tuple[str, str, str]]:
        """(study, run_id, method_label) of each done run its study's spec no longer has (an
        arm removed, a seed dropped): kept in the store, left out of status and reports."""
        rows = self._db.execute(
            """SELECT r.study, r.run_id, r.method_label FROM runs r
               LEFT JOIN planned p ON p.study = r.study AND p.run_id = r.run_id
               WHERE r.status = 'done' AND p.run_id IS NULL
               ORDER BY r.study, r.finished_at, r.run_id"""
        ).fetchall()
        return [(study, run_id, label) for study, run_id, label in rows]

    def save_validation(self, data: str, kind: str, result: dict[str, Any]) -> None:
        """Keep what `rank --validate` found on `data` (replacing an earlier one of that kind)."""
        if kind not in VALIDATION_KINDS:
            raise ConfigError(f"a validation's kind is {' or '.join(VALIDATION_KINDS)}, not {kind}")
        with self._transaction() as db:
            db.execute(
                "INSERT OR REPLACE INTO validations VALUES (?, ?, ?, ?)",
                (data, kind, _json(result), _now()),
            )

    def validations(self) -> list[dict[str, Any]]:
        """Every saved validation (per data set: models, then layers): its result plus data,
        kind and created_at."""
        rows = self._db.execute(
            "SELECT data, kind, result, created_at FROM validations ORDER BY data, kind DESC"
        ).fetchall()
        return [
            {**json.loads(result), "data": data, "kind": kind, "created_at": created}
            for data, kind, result, created in rows
        ]

    def _end(self, run_id: str, status: str, record: str | None, error: str | None) -> None:
        with self._transaction() as db:
            changed = db.execute(
                """UPDATE runs SET status = ?, record = ?, error = ?, finished_at = ?
                   WHERE run_id = ? AND status = 'running'""",
                (status, record, error, _now(), run_id),
            ).rowcount
        if changed != 1:
            raise RuntimeError(f"run {run_id} was not marked running in {self.path}")

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
        problem = _foreign(self._db, self.path)
        if problem:
            raise ConfigError(problem)
        self._db.execute("PRAGMA journal_mode = WAL")
        self._db.execute("PRAGMA synchronous = NORMAL")
        with self._transaction() as db:
            if db.execute("PRAGMA user_version").fetchone()[0] == 0:
                for statement in _SCHEMA:
                    db.execute(statement)

    def _upgrade(self) -> None:
        """Bring an older store up to this schema, one version at a time."""
        version = self._db.execute("PRAGMA user_version").fetchone()[0]
        while version in _UPGRADES:
            with self._transaction() as db:
                for statement in _UPGRADES[version]:
                    db.execute(statement)
            version += 1

    def _check_version(self) -> None:
        version = self._db.execute("PRAGMA user_version").fetchone()[0]
        if version != SCHEMA_VERSION:
            raise ConfigError(
                f"{self.path} is not a results store of this adaptlab version "
                f"(schema {version}, expected {SCHEMA_VERSION})"
            )


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


def _connect(path: Path, read_only: bool) -> sqlite3.Connection:
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


def _foreign(db: sqlite3.Connection, path: Path) -> str | None:
    """Why the SQLite file behind `db` is no store this version may use, or None."""
    version = db.execute("PRAGMA user_version").fetchone()[0]
    tables = db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
    if version == 0 and tables:
        return f"{path} is an SQLite database of another program, not an adaptlab results store"
    if version > SCHEMA_VERSION:
        return (
            f"{path} is a results store of a newer adaptlab (schema {version}, this one reads "
            f"{SCHEMA_VERSION}); upgrade adaptlab"
        )
    return None


def _cannot_open(path: Path, error: sqlite3.DatabaseError) -> str:
    """One line for an SQLite error on opening `path`."""
    if isinstance(error, sqlite3.OperationalError):
        return f"cannot open results store {path} ({error}); check that you may read it"
    return f"{path} is not an adaptlab results store ({error})"


def _strategy_label(run: Planned) -> str | None:
    return run.strategy_label if isinstance(run, PlannedSequence) else None


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def _time(text: str | None) -> datetime | None:
    return datetime.fromisoformat(text) if text else None
