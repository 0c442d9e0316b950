"""The Ray executor: the same runs as Ray tasks on a local 2-CPU Ray, results in the same store."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from study_helpers import integrity, rows, write_reviews, write_spec
from tiny_models import save_tiny_bert

from adaptlab.errors import ConfigError
from adaptlab.study.ray_executor import RAY_HINT, RayExecutor
from adaptlab.study.runner import run_study
from adaptlab.study.spec import Resources
from adaptlab.study.store import load_records


def test_without_ray_the_executor_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError
    with pytest.raises(ConfigError) as error:
        RayExecutor(Resources())
    assert str(error.value) == RAY_HINT == "the Ray executor needs `pip install ray==2.60.0`"


@pytest.mark.ray
def test_runs_as_ray_tasks_into_the_store(local_ray: None, tmp_path: Path) -> None:
    model = save_tiny_bert(str(tmp_path / "tiny-bert"))
    data = write_reviews(tmp_path / "reviews.csv")
    spec = write_spec(
        tmp_path, model, str(data), methods=["lora", {"freeze": {"k": 3}}], seeds=[0, 1]
    )
    summary = run_study(spec, executor=RayExecutor(Resources(cpus=1)))
    store = tmp_path / "tiny.db"
    assert len(summary.outcomes) == 4 and len(summary.failed) == 2
    statuses = sorted((status, error or "") for _, status, _, error in rows(store))
    assert [s for s, _ in statuses] == ["done", "done", "failed", "failed"]
    assert "freeze: k=3 exceeds the 2 blocks" in statuses[-1][1]
    records = load_records(store)
    assert {r.method_label for r in records} == {"lora"}
    assert {r.result.spec.train.seed for r in records} == {0, 1}
    assert all(r.result.epochs and r.result.test for r in records)
    for record in records:  # each task's threads were set before its torch loaded
        threads = record.result.threads
        assert threads is not None and threads.wait_policy == "PASSIVE", threads
        assert (threads.threads, threads.source) == (1, "the CPUs Ray gives it: 1"), threads
    assert integrity(store) == "ok"

    again = run_study(spec, executor=RayExecutor(Resources(cpus=1)))
    assert [o.run.method_label for o in again.outcomes] == ["freeze(k=3)"] * 2  # only the failed

    with pytest.raises(ConfigError, match="asks for 4 CPUs .* Ray cluster has .*2 CPUs"):
        run_study(spec, executor=RayExecutor(Resources(cpus=4)))
