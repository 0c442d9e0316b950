"""What a running study writes into its results store: its plan, and each run's (or
sequence's) life from started to done or failed. Only the `study run` holding the store's lock
file writes (see `lock.py`)."""

from __future__ import annotations

import os
import socket
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from adaptlab.continual.result import SequenceResult
from adaptlab.records.result import RunResult
from adaptlab.study.store_file import StoreFile, json_text, utc_now

if TYPE_CHECKING:
    from adaptlab.study.planned import Planned


class RunWrites(StoreFile):
    """The results store's writes of plans and runs."""

    def set_plan(self, study: str, runs: Sequence[Planned[Any]], metric: str | None = None) -> None:
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
                        json_text(run.spec.to_dict()),
                        run.strategy_label,
                    )
                    for position, run in enumerate(runs)
                ],
            )

    def start(self, run: Planned[Any]) -> None:
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
                    json_text(run.spec.to_dict()),
                    utc_now(),
                    socket.gethostname(),
                    os.getpid(),
                    run.data_digest,
                    run.strategy_label,
                ),
            )

    def reopen(self, run_id: str, why: str) -> None:
        """Mark a done run failed (`why`), so the next start runs it again."""
        with self._transaction() as db:
            db.execute(
                "UPDATE runs SET status = 'failed', error = ? WHERE run_id = ?", (why, run_id)
            )

    def finish(self, run_id: str, result: RunResult | SequenceResult) -> None:
        """Store a finished run's (or sequence's) result and mark it done."""
        self._end(run_id, "done", json_text(result.to_dict()), None)

    def finish_sequence(self, run_id: str, result: SequenceResult) -> None:
        """Store a finished sequence's result and mark it done."""
        self.finish(run_id, result)

    def fail(self, run_id: str, error: str) -> None:
        """Mark a run failed with its one-line error; the next `study run` retries it."""
        self._end(run_id, "failed", None, error)

    def _end(self, run_id: str, status: str, record: str | None, error: str | None) -> None:
        with self._transaction() as db:
            changed = db.execute(
                """UPDATE runs SET status = ?, record = ?, error = ?, finished_at = ?
                   WHERE run_id = ? AND status = 'running'""",
                (status, record, error, utc_now(), run_id),
            ).rowcount
        if changed != 1:
            raise RuntimeError(f"run {run_id} was not marked running in {self.path}")
