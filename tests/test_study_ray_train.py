"""A study run that asks for two processes (`resources: {nproc: 2}`) trains on two Ray Train
workers in their gloo group, and its row equals the same run on one local process."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from study_helpers import write_reviews, write_spec
from test_data_parallel import without_dropout
from tiny_models import save_tiny_bert

from adaptlab.study.ray_executor import RayExecutor
from adaptlab.study.runner import run_study
from adaptlab.study.spec import Resources
from adaptlab.study.store import load_records


@pytest.fixture(scope="module")
def local_ray() -> Iterator[None]:
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, address="local")
    try:
        yield
    finally:
        ray.shutdown()


@pytest.mark.ray
def test_a_run_on_two_ray_train_workers_equals_one_local_process(
    local_ray: None, tmp_path: Path
) -> None:
    model = str(without_dropout(Path(save_tiny_bert(str(tmp_path / "tiny-bert")))))
    data = str(write_reviews(tmp_path / "reviews.csv"))
    keys = {"methods": ["lora"], "seeds": [0], "epochs": 2, "batch_size": 7}
    for folder in ("local", "ray"):
        (tmp_path / folder).mkdir()
    local = write_spec(tmp_path / "local", model, data, **keys)
    ray = write_spec(tmp_path / "ray", model, data, **keys, resources={"nproc": 2, "cpus": 1})
    run_study(local)
    summary = run_study(ray, executor=RayExecutor(Resources(nproc=2, cpus=1)))
    assert not summary.failed, summary.failed
    (alone,) = load_records(tmp_path / "local" / "tiny.db")
    (shared,) = load_records(tmp_path / "ray" / "tiny.db")
    assert shared.run_id == alone.run_id
    assert shared.result.test_loss == pytest.approx(alone.result.test_loss, rel=1e-4)
    for one, two in zip(alone.result.epochs, shared.result.epochs, strict=True):
        assert two.train_loss == pytest.approx(one.train_loss, rel=1e-4)
