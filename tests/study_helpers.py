"""Helpers of the study tests: a learnable CSV, spec files, stored results, and one torch
thread per test run."""

from __future__ import annotations

import csv
import json
import random
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
import torch
import yaml

from adaptlab.records.result import RunResult
from adaptlab.records.spec import RunSpec

OLD_RECORD = Path(__file__).parent / "fixtures" / "record-0.1.0.json"
"""A result in the JSON form adaptlab 0.1.0 wrote (a houlsby study run; the numbers come from a
tiny model): stores and run folders of that version must keep loading."""

WORDS = {
    "fresh": ["great", "lovely", "superb", "fun"],
    "rotten": ["dull", "awful", "boring", "bad"],
}


@dataclass(frozen=True)
class FinishedStudy:
    """A study run once: its folder, spec file and result store."""

    folder: Path
    spec: Path
    store: Path


def write_reviews(path: Path, rows: int = 60) -> Path:
    """A two-class CSV whose label decides the sentiment words (learnable in an epoch)."""
    rng = random.Random(0)
    with path.open("w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(["text", "label"])
        for i in range(rows):
            label = "fresh" if i % 2 else "rotten"
            words = WORDS[label]
            writer.writerow([f"a {rng.choice(words)} film , {rng.choice(words)}", label])
    return path


def write_spec(folder: Path, model: str, data: str, **keys: Any) -> Path:
    """A study spec in `folder` with small defaults; `keys` add or replace top-level keys."""
    spec = {
        "name": "tiny",
        "models": [model],
        "data": [data],
        "methods": ["full", "lora"],
        "seeds": [0, 1],
        "epochs": 1,
        "batch_size": 8,
        **keys,
    }
    return save_spec(folder / f"{spec['name']}.yaml", spec)


def save_spec(path: Path, spec: dict[str, Any]) -> Path:
    """`spec` written to `path` as YAML, its keys in their order."""
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def write_spec_text(folder: Path, text: str) -> Path:
    """`folder`/spec.yaml holding `text`."""
    path = folder / "spec.yaml"
    path.write_text(text)
    return path


def assert_spec_error(path: Path, line: int, parts: Sequence[str]) -> None:
    """Loading the spec at `path` fails in one line naming the file, `line` and every part."""
    from adaptlab.errors import ConfigError
    from adaptlab.study.spec import load_spec

    with pytest.raises(ConfigError) as error:
        load_spec(path)
    message = str(error.value)
    assert f"{path} line {line}" in message, message
    assert all(part in message for part in parts), message
    assert "\n" not in message


def assert_spec_refused(spec: Path, message: str) -> None:
    """Loading the spec at `spec` fails in one line matching `message`."""
    from adaptlab.errors import ConfigError
    from adaptlab.study.spec import load_spec

    with pytest.raises(ConfigError, match=message) as refusal:
        load_spec(spec)
    assert "\n" not in str(refusal.value)


def one_run_store(folder: Path) -> Path:
    """`folder`/s.db, the store of study `s` (spec s.yaml beside it) with one finished run."""
    from test_report_records import make_record

    from adaptlab.study import ResultStore
    from adaptlab.study.planner import plan_study
    from adaptlab.study.spec import load_spec

    spec = folder / "s.yaml"
    spec.write_text("name: s\nmodels: [minilm-l6]\ndata: [rotten-tomatoes]\nmethods: [lora]\n")
    (run,) = plan_study(load_spec(spec), folder)
    path = folder / "s.db"
    with ResultStore(path) as results:
        results.set_plan("s", [run])
        results.start(run)
        results.finish(run.run_id, make_record(study="s", method="lora").result)
    return path


def old_record() -> dict[str, Any]:
    """The 0.1.0 result as JSON data."""
    data: dict[str, Any] = json.loads(OLD_RECORD.read_text())
    return data


def fake_result(spec: RunSpec, seconds: float) -> RunResult:
    """A finished run's result for `spec` (numbers from the 0.1.0 fixture)."""
    return replace(RunResult.from_dict(old_record()), spec=spec, wall_seconds=seconds)


def rows(store: Path) -> list[tuple[Any, ...]]:
    """(run_id, status, finished_at, error) of every row of a store, by run_id."""
    with sqlite3.connect(store) as db:
        return db.execute(
            "SELECT run_id, status, finished_at, error FROM runs ORDER BY run_id"
        ).fetchall()


def integrity(store: Path) -> str:
    """SQLite's own verdict on the store file: 'ok' when sound."""
    with sqlite3.connect(store) as db:
        return str(db.execute("PRAGMA integrity_check").fetchone()[0])


@contextmanager
def one_thread() -> Iterator[None]:
    """One torch thread: tiny models train faster so on a small, shared machine."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)
