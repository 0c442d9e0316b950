"""The results store: its contract with reports, its transactions, and its lock."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest
from study_helpers import fake_result, integrity, rows

from adaptlab.errors import ConfigError
from adaptlab.study.lock import StoreLock
from adaptlab.study.planner import plan_study
from adaptlab.study.spec import load_spec
from adaptlab.study.store import SCHEMA_VERSION, ResultStore, load_records, load_validations


@pytest.fixture
def planned(tmp_path: Path) -> list:  # type: ignore[type-arg]
    spec = tmp_path / "s.yaml"
    spec.write_text(
        "name: s\nmodels: [minilm-l6]\ndata: [rotten-tomatoes]\n"
        "methods: [full, {houlsby: {hidden_size: 256}}, lora+bitfit]\n"
    )
    return plan_study(load_spec(spec), tmp_path)


def drop_sequences(db: sqlite3.Connection) -> None:
    """What schema 5 added for sequence studies, removed (as in a store of schema 4)."""
    db.execute("ALTER TABLE runs DROP COLUMN strategy_label")
    db.execute("ALTER TABLE planned DROP COLUMN strategy_label")
    db.execute("DROP TABLE stages")


def test_rows_follow_the_contract(tmp_path: Path, planned: list) -> None:  # type: ignore[type-arg]
    path = tmp_path / "s.db"
    full, houlsby, combo = planned
    with ResultStore(path) as store:
        store.set_plan("s", planned)
        for run in planned:
            store.start(run)
        store.finish(full.run_id, fake_result(full.spec, 1.5))
        store.finish(houlsby.run_id, fake_result(houlsby.spec, 2.5))
        store.fail(combo.run_id, "lora: rank too large")
        assert store.statuses() == {
            full.run_id: "done",
            houlsby.run_id: "done",
            combo.run_id: "failed",
        }
        failed = [row for row in store.plan_rows() if row.status == "failed"]
    done = sorted(load_records(path), key=lambda record: record.method_label)
    assert [r.method_label for r in done] == ["full", "houlsby(hidden_size=256)"]
    assert (done[0].run_id, done[0].study) == (full.run_id, "s")
    assert done[0].result.to_dict() == fake_result(full.spec, 1.5).to_dict()  # round trip
    assert [(r.run_id, r.error) for r in failed] == [(combo.run_id, "lora: rank too large")]
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        columns = [row[1] for row in db.execute("PRAGMA table_info(runs)")]
        host, pid = db.execute("SELECT host, pid FROM runs LIMIT 1").fetchone()
    assert columns == [
        "run_id",
        "study",
        "status",
        "method_label",
        "spec",
        "record",
        "error",
        "started_at",
        "finished_at",
        "host",
        "pid",
        "data_digest",
        "strategy_label",
    ]
    assert pid == os.getpid() and host
    assert integrity(path) == "ok"


def test_a_done_run_stays_done_and_a_failed_one_restarts(
    tmp_path: Path,
    planned: list,  # type: ignore[type-arg]
) -> None:
    full, houlsby, _ = planned
    with ResultStore(tmp_path / "s.db") as store:
        store.start(full)
        store.finish(full.run_id, fake_result(full.spec, 1.0))
        store.start(full)  # a second start of a done run changes nothing
        store.start(houlsby)
        store.fail(houlsby.run_id, "boom")
        store.start(houlsby)
        assert store.statuses() == {full.run_id: "done", houlsby.run_id: "running"}
        assert [r.run_id for r in store.records()] == [full.run_id]
    restarted = [row for row in rows(tmp_path / "s.db") if row[0] == houlsby.run_id]
    assert restarted == [(houlsby.run_id, "running", None, None)]  # its error is cleared


def test_a_failed_transaction_changes_nothing(tmp_path: Path, planned: list) -> None:  # type: ignore[type-arg]
    with ResultStore(tmp_path / "s.db") as store:
        store.set_plan("s", planned)
        with pytest.raises(sqlite3.IntegrityError):  # the delete ran, the second insert fails
            store.set_plan("s", [planned[0], planned[0]])
        assert [row.run_id for row in store.plan_rows()] == [run.run_id for run in planned]


def test_reading_a_missing_or_foreign_file_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no results store at .*study run"):
        load_records(tmp_path / "missing.db")
    (tmp_path / "notes.db").write_text("not a database, just text " * 100)
    with pytest.raises(ConfigError, match="is not an adaptlab results store"):
        load_records(tmp_path / "notes.db")
    sqlite3.connect(tmp_path / "other.db").execute("CREATE TABLE x (a)").connection.close()
    with pytest.raises(ConfigError, match="not a results store of this adaptlab version"):
        load_records(tmp_path / "other.db")


def test_the_lock_admits_one_study_run(tmp_path: Path) -> None:
    store = tmp_path / "s.db"
    with StoreLock(store):
        with pytest.raises(ConfigError) as refused:
            StoreLock(store).__enter__()
        assert f"pid {os.getpid()}" in str(refused.value)
        assert "in use by another `adaptlab study run`" in str(refused.value)
    with StoreLock(store) as again:  # released on exit
        assert again.path == tmp_path / "s.db.lock"


def test_validations_are_kept_per_data_set_and_kind(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with ResultStore(path) as store:
        store.save_validation("reuters-r8", "models", {"fine_tuned": {"a": 0.5}})
        store.save_validation("reuters-r8", "models", {"fine_tuned": {"a": 0.7}})  # replaces
        store.save_validation("reuters-r8", "layers", {"fine_tuned": {"a#L1": 0.6}})
        with pytest.raises(ConfigError, match="a validation's kind is models or layers"):
            store.save_validation("reuters-r8", "heads", {})
    saved = load_validations(path)
    assert [(v["data"], v["kind"], v["fine_tuned"]) for v in saved] == [
        ("reuters-r8", "models", {"a": 0.7}),
        ("reuters-r8", "layers", {"a#L1": 0.6}),
    ]
    assert all(v["created_at"] for v in saved)


def test_a_store_of_the_first_schema_is_upgraded_in_place(
    tmp_path: Path,
    planned: list,  # type: ignore[type-arg]
) -> None:
    path = tmp_path / "old.db"
    with ResultStore(path) as store:
        store.start(planned[0])
        store.finish(planned[0].run_id, fake_result(planned[0].spec, 1.0))
    with sqlite3.connect(path) as db:  # what a store written before validations looked like
        db.execute("DROP TABLE validations")
        db.execute("ALTER TABLE runs DROP COLUMN data_digest")
        db.execute("DROP TABLE studies")
        drop_sequences(db)
        db.execute("PRAGMA user_version = 1")
    db.close()
    assert len(load_records(path)) == 1  # opening upgrades it; the runs stay
    assert load_validations(path) == []
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert db.execute("SELECT data_digest FROM runs").fetchall() == [(None,)]
    db.close()
    assert integrity(path) == "ok"


def test_a_studys_metric_is_kept_and_a_store_without_it_is_upgraded(
    tmp_path: Path,
    planned: list,  # type: ignore[type-arg]
) -> None:
    path = tmp_path / "s.db"
    with ResultStore(path) as store:
        store.set_plan("s", planned, "macro_f1")
        store.start(planned[0])
        store.finish(planned[0].run_id, fake_result(planned[0].spec, 1.0))
        assert [r.study_metric for r in store.records()] == ["macro_f1"]
        store.set_plan("s", planned)  # the spec no longer asks: the default rule again
        assert [r.study_metric for r in store.records()] == [None]
    with sqlite3.connect(path) as db:  # a store of schema 3, before `metric:` existed
        db.execute("DROP TABLE studies")
        drop_sequences(db)
        db.execute("PRAGMA user_version = 3")
    db.close()
    assert [r.study_metric for r in load_records(path)] == [None]
    with ResultStore(path) as store:
        store.set_plan("s", planned, "accuracy")
        assert [r.study_metric for r in store.records()] == ["accuracy"]
