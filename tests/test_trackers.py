"""Experiment trackers: a run, a sequence and a study reported to TensorBoard and MLflow, read
back with each tool's own reader (TensorBoard's event accumulator, `mlflow.search_runs` on a
file store in tmp_path)."""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from study_helpers import write_reviews, write_spec
from test_startup_imports import fresh

from adaptlab.cli.app import main
from adaptlab.errors import ConfigError
from adaptlab.integrations.trackers.choice import folder_tracking, report_to
from adaptlab.integrations.trackers.records import flat_params, stage_prefix
from adaptlab.integrations.trackers.reporter import Reporter, Sink, Status
from adaptlab.records.result import EpochRecord, read_result
from adaptlab.study.executors import LocalExecutor
from adaptlab.study.planner import plan_study
from adaptlab.study.runner import run_study
from adaptlab.study.spec import load_spec

EXPERIMENT = "tracked"


@pytest.fixture
def mlflow_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A file store in tmp_path as the tracking URI the user set."""
    uri = (tmp_path / "mlruns").as_uri()
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    monkeypatch.setenv("MLFLOW_EXPERIMENT_NAME", EXPERIMENT)
    return uri


def run_cli(args: list[str]) -> int:
    with pytest.raises(SystemExit) as done:
        main(args)
        raise SystemExit(0)
    return int(done.value.code or 0)


def scalars(folder: Path) -> dict[str, list[tuple[int, float]]]:
    """Every scalar TensorBoard reads from `folder`'s event files: name -> (step, value)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(folder))
    events.Reload()
    return {
        name: [(event.step, event.value) for event in events.Scalars(name)]
        for name in events.Tags()["scalars"]
    }


def text(folder: Path, name: str) -> str:
    """The text summary `name` TensorBoard reads from `folder`."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.util import tensor_util

    events = EventAccumulator(str(folder))
    events.Reload()
    (event,) = events.Tensors(f"{name}/text_summary")
    return str(tensor_util.make_ndarray(event.tensor_proto).item().decode())


def close(found: float, expected: float) -> bool:
    return abs(found - expected) <= 1e-5 * max(1.0, abs(expected))


def test_report_to_names_trackers_or_none() -> None:
    assert report_to("none") == ()
    assert report_to("mlflow, tensorboard") == ("mlflow", "tensorboard")
    assert report_to(["tensorboard", "tensorboard"]) == ("tensorboard",)
    with pytest.raises(ConfigError, match="--report-to: expected none, tensorboard or mlflow"):
        report_to("wandb")
    with pytest.raises(ConfigError, match="none cannot be given with mlflow"):
        report_to("none,mlflow")
    assert folder_tracking("none", "runs/x") is None


def test_a_missing_package_stops_the_command_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    found = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "mlflow" else found(name, *a)
    )
    args = ["train", "--model", "m", "--data", "d", "--out", str(tmp_path / "r")]
    assert run_cli([*args, "--report-to", "mlflow"]) == 1
    err = capsys.readouterr().err.strip()
    assert err == (
        "error: --report-to mlflow needs `pip install mlflow-skinny==3.17.2` (or the "
        "integrations extra: pip install 'adaptlab[integrations]')"
    )


def test_the_study_key_is_checked(tmp_path: Path) -> None:
    spec = write_spec(tmp_path, "m", "d", report_to=["tensorboard", "neptune"])
    with pytest.raises(ConfigError, match="report_to.*got 'neptune'"):
        load_spec(spec)
    assert load_spec(write_spec(tmp_path, "m", "d", report_to="mlflow")).report_to == ("mlflow",)
    assert load_spec(write_spec(tmp_path, "m", "d")).report_to == ()


class Recorded:
    """A sink that keeps what it was given."""

    def __init__(self) -> None:
        self.values: dict[str, list[tuple[int, float]]] = {}
        self.flushes = 0
        self.closed: Status | None = None

    def scalars(self, values: Mapping[str, float], step: int) -> None:
        for name, value in values.items():
            self.values.setdefault(name, []).append((step, value))

    def flush(self) -> None:
        self.flushes += 1

    def close(self, status: Status, artifact: Path | None) -> None:
        self.closed = status


def epoch(step: int, accuracy: float) -> EpochRecord:
    return EpochRecord(1, step, 0.5, 0.4, {"accuracy": accuracy}, 1.0)


def test_stages_share_one_rising_step_and_name_their_dev_scores() -> None:
    sink = Recorded()
    reporter = Reporter(lambda first: [sink])
    for title, steps, accuracy in (("stage 1/2 a ", 3, 0.6), ("stage 2/2 b ", 2, 0.7)):
        for step in range(1, steps + 1):
            reporter.on_step(title, step, 1.0 / step, 1e-3)
        reporter.on_epoch(title, epoch(steps, accuracy), "accuracy")
    reporter.final({"test/average": 0.65})
    reporter.close("FINISHED", None)
    assert [step for step, _ in sink.values["train/loss"]] == [1, 2, 3, 4, 5]
    assert sink.values["stage_1_2_a/dev/accuracy"] == [(3, 0.6)]
    assert sink.values["stage_2_2_b/dev/accuracy"] == [(5, 0.7)]
    assert sink.values["test/average"] == [(5, 0.65)]
    assert (sink.flushes, sink.closed) == (2, "FINISHED")
    assert stage_prefix("") == ""


def test_a_run_that_never_trains_opens_no_tracker() -> None:
    opened: list[Sink] = []

    def open_sinks(first: int) -> list[Sink]:
        opened.append(Recorded())
        return opened

    reporter = Reporter(open_sinks)
    reporter.final({"test/accuracy": 1.0})
    reporter.close("FAILED", None)
    assert opened == []


def test_a_spec_becomes_flat_parameters() -> None:
    spec = {"model": "m", "methods": [{"name": "lora", "config": {"r": 8}}], "size": None}
    assert flat_params({**spec, "empty": []}) == {
        "model": "m",
        "methods.0.name": "lora",
        "methods.0.config.r": "8",
        "size": "null",
        "empty": "[]",
    }


def test_help_and_the_trackers_face_load_no_tracker() -> None:
    found = fresh(
        "import contextlib, io, sys\n"
        "from adaptlab.cli.app import main\n"
        "import adaptlab.integrations.trackers, adaptlab.study.spec_fields\n"
        "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
        "    main(['--help'])\n"
        "found['trackers'] = [m for m in ('tensorboard', 'mlflow') if m in sys.modules]"
    )
    assert found["heavy"] == [] and found["trackers"] == []


def test_a_train_run_reports_to_tensorboard_and_mlflow(
    tiny_model_dir: str, tmp_path: Path, mlflow_store: str
) -> None:
    import mlflow
    from mlflow.tracking import MlflowClient

    data = write_reviews(tmp_path / "reviews.csv")
    out = tmp_path / "runs" / "lora"
    args = ["train", "--model", tiny_model_dir, "--data", str(data), "--method", "lora"]
    options = ["--epochs", "2", "--batch-size", "8", "--learning-rate", "1e-3", "--no-progress"]
    assert run_cli([*args, *options, "--out", str(out), "--report-to", "tensorboard,mlflow"]) == 0
    result = read_result(out / "metrics.json")
    last = result.epochs[-1].step

    board = scalars(tmp_path / "runs" / "tensorboard" / "lora")
    assert [step for step, _ in board["train/loss"]] == list(range(1, last + 1))
    assert [step for step, _ in board["train/learning_rate"]] == list(range(1, last + 1))
    dev = [(e.step, e.dev_metrics["accuracy"]) for e in result.epochs]
    assert [step for step, _ in board["dev/accuracy"]] == [step for step, _ in dev]
    assert all(close(v, w) for (_, v), (_, w) in zip(board["dev/accuracy"], dev, strict=True))
    ((step, accuracy),) = board["test/accuracy"]
    assert step == last and close(accuracy, result.test["accuracy"])
    assert json.loads(text(tmp_path / "runs" / "tensorboard" / "lora", "spec")) == (
        result.spec.to_dict()
    )

    (run,) = mlflow.search_runs(experiment_names=[EXPERIMENT], output_format="list")
    assert run.info.run_name == "lora" and run.info.status == "FINISHED"
    assert run.data.params["methods.0.name"] == "lora"
    assert run.data.params["train.epochs"] == "2"
    assert close(run.data.metrics["test/accuracy"], result.test["accuracy"])
    client = MlflowClient()
    history = client.get_metric_history(run.info.run_id, "train/loss")
    assert sorted(metric.step for metric in history) == list(range(1, last + 1))
    dev_history = sorted(
        (m.step, m.value) for m in client.get_metric_history(run.info.run_id, "dev/accuracy")
    )
    assert [step for step, _ in dev_history] == [step for step, _ in dev]
    assert all(close(v, w) for (_, v), (_, w) in zip(dev_history, dev, strict=True))
    stored = {Path(f.path).name for f in client.list_artifacts(run.info.run_id, "adapter")}
    assert stored == {path.name for path in (out / "adapter").iterdir()}


def test_a_sequence_reports_every_stage_on_one_step(
    tiny_model_dir: str, stages: tuple[str, str], tmp_path: Path
) -> None:
    out = tmp_path / "seq"
    args = ["sequence", "--model", tiny_model_dir, "--stages", ",".join(stages)]
    options = ["--epochs", "1", "--batch-size", "8", "--learning-rate", "5e-3", "--no-progress"]
    assert run_cli([*args, *options, "--out", str(out), "--report-to", "tensorboard"]) == 0
    board = scalars(tmp_path / "tensorboard" / "seq")
    steps = [step for step, _ in board["train/loss"]]
    assert steps == list(range(1, len(steps) + 1))
    result = json.loads((out / "sequence.json").read_text())
    first = result["stages"][0]["epochs"][-1]["step"]
    assert [step for step, _ in board["stage_1_2_sentiment/dev/accuracy"]] == [first]
    ((end, _),) = board["stage_2_2_topic/dev/accuracy"]
    assert end == steps[-1] > first
    ((_, average),) = board["test/average"]
    assert close(average, result["scores"]["average"])
    ((_, topic),) = board["test/topic/accuracy"]
    assert close(topic, result["matrix"][-1][1])


def reviews_study(folder: Path, model: str, **keys: Any) -> Path:
    """`write_spec` in `folder` of `model` on a reviews file written there, with `keys`."""
    return write_spec(folder, model, str(write_reviews(folder / "reviews.csv")), **keys)


def tags_of(run: Any) -> dict[str, str]:
    return {key: value for key, value in run.data.tags.items() if not key.startswith("mlflow.")}


def test_a_study_is_one_experiment_with_a_run_per_cell(
    tiny_model_dir: str, tmp_path: Path, mlflow_store: str
) -> None:
    import mlflow
    from mlflow.entities import ViewType
    from mlflow.tracking import MlflowClient

    spec = reviews_study(
        tmp_path,
        tiny_model_dir,
        methods=["lora", "bitfit"],
        seeds=[3],
        train_sizes=[20],
        learning_rates=[1e-3],
        report_to=["tensorboard", "mlflow"],
    )
    cells = {run.run_id: run for run in plan_study(load_spec(spec), tmp_path)}
    client = MlflowClient()
    cut_off = client.create_run(
        client.create_experiment("tiny"), tags={"run_id": next(iter(cells))}
    )  # an earlier try of a cell, stopped before it finished

    run_study(spec, executor=LocalExecutor(progress=False))
    runs = mlflow.search_runs(experiment_names=["tiny"], output_format="list")
    assert sorted(run.info.run_name for run in runs) == sorted(cells)
    for run in runs:
        cell = cells[run.info.run_name]
        assert run.info.status == "FINISHED"
        assert tags_of(run) == {
            "model": Path(tiny_model_dir).name,
            "data": "reviews.csv",
            "method": cell.method_label,
            "size": "20",
            "seed": "3",
            "learning_rate": "0.001",
            "study": "tiny",
            "run_id": cell.run_id,
        }
        assert "test/accuracy" in run.data.metrics
        board = scalars(tmp_path / "tiny-tensorboard" / cell.run_id)
        assert "dev/accuracy" in board and "test/accuracy" in board
    deleted = mlflow.search_runs(
        experiment_names=["tiny"], run_view_type=ViewType.DELETED_ONLY, output_format="list"
    )
    assert [run.info.run_id for run in deleted] == [cut_off.info.run_id]

    run_study(spec, executor=LocalExecutor(progress=False))  # resumed: every cell done
    again = mlflow.search_runs(experiment_names=["tiny"], output_format="list")
    assert sorted(run.info.run_id for run in again) == sorted(run.info.run_id for run in runs)


def test_each_sequence_of_a_sequence_study_is_a_run(
    tiny_model_dir: str, stages: tuple[str, str], tmp_path: Path, mlflow_store: str
) -> None:
    import mlflow
    from sequence_study_helpers import write_sequence_spec

    spec = write_sequence_spec(
        tmp_path, tiny_model_dir, list(stages), strategies=["sequential"], report_to="mlflow"
    )
    run_study(spec, executor=LocalExecutor(progress=False))
    (run,) = mlflow.search_runs(experiment_names=["cl"], output_format="list")
    assert (run.data.tags["strategy"], run.data.tags["method"]) == (
        "sequential",
        "houlsby(hidden_size=8)",
    )
    assert run.info.status == "FINISHED" and "test/average" in run.data.metrics
    assert {"stage_1_2_sentiment/dev/accuracy", "stage_2_2_topic/dev/accuracy"} <= set(
        run.data.metrics
    )


@pytest.fixture(scope="module")
def local_ray() -> Iterator[None]:
    ray = pytest.importorskip("ray")
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        yield
    finally:
        ray.shutdown()


@pytest.mark.ray
def test_a_ray_task_opens_the_trackers_its_run_describes(
    local_ray: None, tiny_model_dir: str, tmp_path: Path, mlflow_store: str
) -> None:
    import mlflow

    from adaptlab.study.ray_executor import RayExecutor
    from adaptlab.study.spec import Resources

    spec = reviews_study(
        tmp_path,
        tiny_model_dir,
        methods=["lora"],
        seeds=[0],
        report_to="tensorboard,mlflow",
    )
    (cell,) = plan_study(load_spec(spec), tmp_path)
    summary = run_study(spec, executor=RayExecutor(Resources(cpus=1)))
    assert summary.failed == []
    (run,) = mlflow.search_runs(experiment_names=["tiny"], output_format="list")
    assert run.info.run_name == cell.run_id and run.info.status == "FINISHED"
    assert "test/accuracy" in scalars(tmp_path / "tiny-tensorboard" / cell.run_id)


def test_a_run_that_fails_is_closed_as_failed(tmp_path: Path, mlflow_store: str) -> None:
    import mlflow

    from adaptlab.engine.events import tell_step
    from adaptlab.integrations.trackers import track

    tracking = folder_tracking("mlflow,tensorboard", tmp_path / "runs" / "broken")
    with pytest.raises(ConfigError, match="diverged"), track(tracking, {"model": "m"}):
        tell_step("", 1, 0.7, 1e-3)
        raise ConfigError("diverged")
    (run,) = mlflow.search_runs(experiment_names=[EXPERIMENT], output_format="list")
    assert (run.info.run_name, run.info.status) == ("broken", "FAILED")
    assert run.data.metrics["train/loss"] == pytest.approx(0.7)
    assert text(tmp_path / "runs" / "tensorboard" / "broken", "status") == "FAILED"
    tell_step("", 2, 0.6, 1e-3)  # after the block, nothing listens
    assert [
        m.step for m in mlflow.MlflowClient().get_metric_history(run.info.run_id, "train/loss")
    ] == [1]


def test_a_resumed_run_goes_on_where_its_stopped_try_left(
    tmp_path: Path, mlflow_store: str
) -> None:
    import mlflow

    from adaptlab.engine.events import tell_step
    from adaptlab.integrations.trackers import track

    tracking = folder_tracking("mlflow,tensorboard", tmp_path / "runs" / "long")
    with pytest.raises(KeyboardInterrupt), track(tracking, {"model": "m"}):
        for step in (1, 2, 3):  # a checkpoint after step 2, then Ctrl-C
            tell_step("", step, 1.0, 1e-3)
        raise KeyboardInterrupt
    (stopped,) = mlflow.search_runs(experiment_names=[EXPERIMENT], output_format="list")
    assert stopped.info.status == "KILLED"
    with track(tracking, {"model": "m"}):
        for step in (3, 4):  # resumed from the checkpoint
            tell_step("", step, 0.5, 1e-3)
    (run,) = mlflow.search_runs(experiment_names=[EXPERIMENT], output_format="list")
    assert (run.info.run_id, run.info.status) == (stopped.info.run_id, "FINISHED")
    history = mlflow.MlflowClient().get_metric_history(run.info.run_id, "train/loss")
    assert sorted({metric.step for metric in history}) == [1, 2, 3, 4]
    board = scalars(tmp_path / "runs" / "tensorboard" / "long")
    assert board["train/loss"] == [(1, 1.0), (2, 1.0), (3, 0.5), (4, 0.5)]
