"""A study on a multi-node Ray cluster that loses a node mid-study: Ray runs the lost runs again
on the nodes left, the driver writes each run once, and the store equals the same study run
locally. The cluster is three simulated nodes on this machine (`ray.cluster_utils.Cluster`)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from cli_cases import run_cli
from study_helpers import fake_result, one_thread, rows, write_reviews, write_spec
from tiny_models import save_tiny_bert

from adaptlab.errors import ConfigError
from adaptlab.study.executors import LocalExecutor
from adaptlab.study.planner import plan_study
from adaptlab.study.ray_executor import RayExecutor
from adaptlab.study.ray_nodes import NodeWatch, lost_line
from adaptlab.study.runner import run_study
from adaptlab.study.spec import Resources, load_spec
from adaptlab.study.store import ResultStore, load_records

SPEC_LINE = "name: s\nmodels: [m]\ndata: [d.csv]\nmethods: [lora]\n"


@pytest.mark.parametrize(
    ("resources", "error"),
    [
        ("{gpus: 1.5}", "resources.gpus: .*a share of one GPU .* or a whole number"),
        ("{gpus: 0.00001}", "resources.gpus: .*more decimals than Ray counts"),
        ("{max_retries: -1}", "resources.max_retries: .*greater than or equal to 0"),
        ("{max_retries: 1.5}", "resources.max_retries: "),
    ],
)
def test_resources_refused_in_one_line(tmp_path: Path, resources: str, error: str) -> None:
    spec = tmp_path / "s.yaml"
    spec.write_text(f"{SPEC_LINE}resources: {resources}\n")
    with pytest.raises(ConfigError, match=error) as raised:
        load_spec(spec)
    assert "\n" not in str(raised.value) and "line 5" in str(raised.value)


def test_resources_take_gpu_shares_and_retries(tmp_path: Path) -> None:
    spec = tmp_path / "s.yaml"
    spec.write_text(f"{SPEC_LINE}resources: {{cpus: 0.5, gpus: 0.25, max_retries: 0}}\n")
    assert load_spec(spec).resources == Resources(cpus=0.5, gpus=0.25, max_retries=0)
    spec.write_text(SPEC_LINE)
    assert load_spec(spec).resources == Resources(cpus=1.0, gpus=0.0, max_retries=3)


def test_a_run_arriving_twice_is_written_once(tmp_path: Path) -> None:
    model = save_tiny_bert(str(tmp_path / "tiny-bert"))
    spec = write_spec(tmp_path, model, str(write_reviews(tmp_path / "r.csv")), seeds=[0])
    run = plan_study(load_spec(spec), tmp_path)[0]
    with ResultStore(tmp_path / "s.db") as store:
        store.set_plan("tiny", [run])
        store.start(run)
        store.finish(run.run_id, fake_result(run.spec, 1.0))
        with pytest.raises(RuntimeError, match=f"run {run.run_id} was not marked running"):
            store.finish(run.run_id, fake_result(run.spec, 2.0))
        store.start(run)  # a done run stays done
    ((run_id, status, _, _),) = rows(tmp_path / "s.db")
    assert (run_id, status) == (run.run_id, "done")
    (record,) = load_records(tmp_path / "s.db")
    assert record.result.wall_seconds == 1.0


def test_cuda_runs_on_ray_must_ask_for_gpus(tmp_path: Path) -> None:
    pytest.importorskip("ray")
    model = save_tiny_bert(str(tmp_path / "tiny-bert"))
    data = str(write_reviews(tmp_path / "r.csv"))
    for device, gpus, error in [
        ("cuda", 0.0, r"runs on cuda ask Ray for no GPU.* add resources: \{gpus: 1\}"),
        ("cuda:1", 0.5, "device: cuda:1 names a GPU of this machine"),
    ]:
        spec = write_spec(tmp_path, model, data, device=device, precision="fp32")
        runs = plan_study(load_spec(spec), tmp_path)
        executor = RayExecutor(Resources(gpus=gpus))
        with pytest.raises(ConfigError, match=error):
            next(executor.run(runs, lambda run: None, lambda run, index, stage: None))


def test_gpu_shares_set_how_many_runs_are_in_flight() -> None:
    pytest.importorskip("ray")
    cluster = SimpleNamespace(cluster_resources=lambda: {"CPU": 16.0, "GPU": 2.0})
    assert RayExecutor(Resources(gpus=0.25))._width(cluster) == 8  # 4 runs on each GPU
    assert RayExecutor(Resources(cpus=4, gpus=0.25))._width(cluster) == 4  # CPUs bind first
    assert RayExecutor(Resources(cpus=0.5))._width(cluster) == 32


@dataclass(frozen=True)
class Ref:
    """An object ref's stand-in: what NodeWatch asks of one (its task id)."""

    task: str

    def task_id(self) -> bytes:
        return bytes.fromhex(f"0{self.task}")


def test_a_lost_node_is_logged_with_its_runs_or_alone(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    state = pytest.importorskip("ray.util.state")
    from ray.util.state.exception import ServerUnavailable

    nodes = [
        {"NodeID": name, "NodeManagerAddress": f"10.0.0.{i}", "Alive": True}
        for i, name in enumerate(["n0", "n1", "n2"])
    ]
    watch = NodeWatch(SimpleNamespace(nodes=lambda: nodes), max_retries=1)
    pending: dict[Any, Any] = {Ref(t): SimpleNamespace(run_id=f"r{i}") for i, t in enumerate("ab")}
    on_n1 = [SimpleNamespace(task_id=f"0{t}", attempt_number=a) for t, a in [("a", 0), ("b", 1)]]
    monkeypatch.setattr(state, "list_tasks", lambda **_: on_n1)
    caplog.set_level(logging.INFO, logger="adaptlab.study")
    watch.check(pending)
    assert caplog.messages == []  # nothing lost yet
    nodes[1]["Alive"] = False
    watch.check(pending)
    assert caplog.messages == [
        "Ray node n1 (10.0.0.1) left the cluster",
        "run r0 lost with node n1; Ray retries it (1 of 1)",
        "run r1 lost with node n1; no retries left (max_retries: 1)",
    ]

    def unavailable(**_: Any) -> None:
        raise ServerUnavailable("no dashboard")

    monkeypatch.setattr(state, "list_tasks", unavailable)
    caplog.clear()
    del nodes[2]
    watch.check(pending)
    watch.check(pending)  # told once
    assert caplog.messages == [
        "Ray node n2 (10.0.0.2) left the cluster; Ray retries the runs that were on it "
        "(max_retries: 1)"
    ]


def test_a_run_out_of_retries_names_its_node_in_one_line() -> None:
    exceptions = pytest.importorskip("ray.exceptions")
    died = exceptions.NodeDiedError(
        "Task failed because the node it was running on is dead or unavailable. Node IP: "
        "10.0.0.1, node ID: 0abc12. This can happen if the node was preempted, ..."
    )
    assert (
        lost_line(died, 2) == "lost with Ray node 0abc12 after 2 retries (resources: max_retries)"
    )
    reworded = exceptions.NodeDiedError("node 0abc12 is gone\nsee its logs")
    assert lost_line(reworded, 0) == "lost with its Ray node after 0 retries: node 0abc12 is gone"


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    """A head node and two worker nodes of one CPU each (the driver connects by address)."""
    cluster_utils = pytest.importorskip("ray.cluster_utils")
    cluster = cluster_utils.Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    try:
        for _ in range(2):
            cluster.add_node(num_cpus=1)
        cluster.wait_for_nodes()
        yield cluster
    finally:
        cluster.shutdown()


class NodeKiller(threading.Thread):
    """Removes the first worker node seen running one of a study's runs (from Ray's state API)."""

    def __init__(self, cluster: Any) -> None:
        super().__init__(daemon=True)
        self.cluster = cluster
        self.killed: tuple[str, str] | None = None  # (run id, node id)

    def run(self) -> None:
        from ray.util.state import list_tasks
        from ray.util.state.exception import RayStateApiException

        workers = {node.node_id: node for node in self.cluster.worker_nodes}
        deadline = time.monotonic() + 120
        while self.killed is None and time.monotonic() < deadline:
            try:
                running = list_tasks(
                    address=self.cluster.address, filters=[("state", "=", "RUNNING")]
                )
            except RayStateApiException:
                running = []
            for task in running:
                if task.node_id in workers and task.name.startswith("adaptlab run "):
                    run_id = task.name.removeprefix("adaptlab run ")
                    logging.getLogger("adaptlab.study").warning(
                        "test: removing node %s while run %s is on it", task.node_id, run_id
                    )
                    self.cluster.remove_node(workers[task.node_id])
                    self.killed = (run_id, task.node_id)
                    break
            time.sleep(0.2)


def slow_study(folder: Path, runs: int, **keys: Any) -> Path:
    """`runs` runs (seeds) of a few seconds each (800 examples, 3 epochs): long enough to be
    seen running and killed."""
    model = save_tiny_bert(str(folder / "tiny-bert"))
    data = write_reviews(folder / "reviews.csv", rows=800)
    seeds = list(range(runs))
    return write_spec(
        folder,
        model,
        str(data),
        methods=["full"],
        seeds=seeds,
        epochs=3,
        learning_rates=[1e-3],
        **keys,
    )


@pytest.mark.ray
def test_runs_lost_with_a_node_run_again_elsewhere_once(
    cluster: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="adaptlab.study")
    spec = slow_study(tmp_path, 4, resources={"cpus": 1, "max_retries": 2})
    killer = NodeKiller(cluster)
    killer.start()
    executor = RayExecutor(load_spec(spec).resources, cluster.address)
    summary = run_study(spec, store_path=tmp_path / "ray.db", executor=executor)
    killer.join(timeout=5)
    assert killer.killed is not None, "no run was seen on a worker node"
    lost_run, lost_node = killer.killed
    log = caplog.text
    assert f"Ray node {lost_node} " in log and "left the cluster" in log
    assert f"run {lost_run} lost with node {lost_node}; Ray retries it (1 of 2)" in log

    planned = [run.run_id for run in plan_study(load_spec(spec), tmp_path)]
    assert sorted(o.run.run_id for o in summary.outcomes) == sorted(planned)  # each run once
    assert not summary.failed
    stored = rows(tmp_path / "ray.db")
    assert [(run_id, status) for run_id, status, _, _ in stored] == [
        (run_id, "done") for run_id in sorted(planned)
    ]

    with one_thread():  # one thread, as each Ray task has
        run_study(spec, store_path=tmp_path / "local.db", executor=LocalExecutor(progress=False))
    on_ray = {r.run_id: r.result for r in load_records(tmp_path / "ray.db")}
    local = {r.run_id: r.result for r in load_records(tmp_path / "local.db")}
    assert on_ray.keys() == local.keys() == set(planned)
    assert len({result.test_loss for result in local.values()}) == 4  # seeds tell runs apart
    for run_id, result in local.items():
        assert on_ray[run_id].test == pytest.approx(result.test, rel=1e-4, abs=1e-6)
        assert on_ray[run_id].test_loss == pytest.approx(result.test_loss, rel=1e-4)
        assert [e.train_loss for e in on_ray[run_id].epochs] == pytest.approx(
            [e.train_loss for e in result.epochs], rel=1e-4
        )


@pytest.mark.ray
def test_a_run_out_of_retries_fails_once_and_resumes(
    cluster: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if not cluster.worker_nodes:
        cluster.add_node(num_cpus=1)
    spec = slow_study(tmp_path, 2, resources={"max_retries": 0})
    store = tmp_path / "ray.db"
    command = ["study", "run", str(spec), "--store", str(store), "--no-progress"]
    killer = NodeKiller(cluster)
    killer.start()
    code, _, err = run_cli([*command, "--executor", "ray", "--address", cluster.address], capsys)
    killer.join(timeout=5)
    assert killer.killed is not None, "no run was seen on a worker node"
    lost_run, lost_node = killer.killed
    lost = f"lost with Ray node {lost_node} after 0 retries (resources: max_retries)"
    assert code == 1
    assert f"run {lost_run} lost with node {lost_node}; no retries left (max_retries: 0)" in err
    assert f"error: 1 of 2 runs failed (first: full: {lost});" in err
    assert sorted((status, error) for _, status, _, error in rows(store)) == [
        ("done", None),
        ("failed", lost),
    ]
    assert [run_id for run_id, status, _, _ in rows(store) if status == "failed"] == [lost_run]

    again = run_study(spec, store_path=store, executor=RayExecutor(Resources(), cluster.address))
    assert [o.run.run_id for o in again.outcomes] == [lost_run] and not again.failed
    assert {status for _, status, _, _ in rows(store)} == {"done"}
