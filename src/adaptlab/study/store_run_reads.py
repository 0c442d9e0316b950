"""What readers (`study status`, the report, `rank --validate`) read from a results store:
the runs' statuses, the done runs and sequences as typed records, and each study's plan."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from adaptlab.continual.result import SequenceResult
from adaptlab.errors import ConfigError
from adaptlab.records.result import RunResult
from adaptlab.study.store_file import StoreFile
from adaptlab.study.store_rows import PlanRow, StoredRun, StoredSequence


class RunReads(StoreFile):
    """The results store's reads of runs, sequences and plans."""

    def statuses(self) -> dict[str, str]:
        """run_id -> status of every run ever started in this store."""
        return dict(self._db.execute("SELECT run_id, status FROM runs").fetchall())

    def data_digests(self) -> dict[str, str | None]:
        """run_id -> the hash of the data contents each done run trained on (None: unknown)."""
        rows = self._db.execute("SELECT run_id, data_digest FROM runs WHERE status = 'done'")
        return dict(rows.fetchall())

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
                    _data_sources(planned),
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


def _data_sources(spec: dict[str, Any]) -> tuple[str, ...]:
    """The data sources a planned run's spec names: its data set and a multi-task run's others
    (a sequence's spec names stages instead)."""
    if "data" not in spec:
        return ()
    return (spec["data"], *(task["data"] for task in spec.get("multi_task", [])))


def _time(text: str | None) -> datetime | None:
    return datetime.fromisoformat(text) if text else None
