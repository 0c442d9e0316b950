"""Experiment trackers given hostile places and names: every case ends in one line, exit 1, before
the run trains and with nothing on disk changed, or (where the input is fine) works.

TensorBoard folders that are files, links, unwritable or hold another writer's event files;
MLflow stores that are files, unwritable, refused, unknown, or servers that refuse or never
answer (a loopback port, answered in seconds); `--report-to` values and a study's `report_to:`;
names MLflow cannot keep.
"""

from __future__ import annotations

import importlib.util
import os
import socket
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Protocol

import pytest
from cli_cases import read_only, refused, run_cli, unchanged, write_reviews
from study_helpers import write_spec

from adaptlab.integrations.trackers import destinations
from adaptlab.integrations.trackers.tensorboard import EVENTS_MARK, TensorBoardSink

MLFLOW_VARIABLES = ("MLFLOW_TRACKING_URI", "MLFLOW_EXPERIMENT_NAME", "MLFLOW_ALLOW_FILE_STORE")
PROXY_VARIABLES = ("http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY")


@pytest.fixture
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The current folder, with a data file and no tracker settings or proxies."""
    monkeypatch.chdir(tmp_path)
    for name in (*MLFLOW_VARIABLES, *PROXY_VARIABLES, "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    write_reviews(tmp_path / "d.csv")
    return tmp_path


def train(model: str, out: Path | str, report_to: str, data: str = "d.csv") -> list[str]:
    """`adaptlab train` of one small epoch into `out`, reporting to `report_to`."""
    return [
        *("train", "--model", model, "--data", data, "--method", "lora"),
        *("--epochs", "1", "--batch-size", "16", "--no-progress"),
        *("--out", str(out), "--report-to", report_to),
    ]


class TrainRefused(Protocol):
    """`adaptlab train` into OUT reporting to REPORT_TO (with DATA and EXTRA options), which
    must fail in one line holding every needle and change nothing in the work folder."""

    def __call__(
        self,
        out: str,
        report_to: str,
        *needles: str,
        data: str = "d.csv",
        extra: Sequence[str] = (),
    ) -> str: ...


@pytest.fixture
def train_refused(
    work: Path, tiny_model_dir: str, capsys: pytest.CaptureFixture[str]
) -> TrainRefused:
    """A refused `adaptlab train` of the tiny model in the work folder; the line comes back."""

    def run(
        out: str,
        report_to: str,
        *needles: str,
        data: str = "d.csv",
        extra: Sequence[str] = (),
    ) -> str:
        with unchanged(work):
            return refused([*train(tiny_model_dir, out, report_to, data), *extra], capsys, *needles)

    return run


def test_a_file_where_the_tensorboard_folder_goes_is_refused(
    work: Path,
    train_refused: TrainRefused,
) -> None:
    (work / "runs").mkdir()
    (work / "runs" / "tensorboard").write_text("my notes\n")
    train_refused(
        "runs/lora",
        "tensorboard",
        "runs/tensorboard is a file, not a folder",
    )
    (work / "runs" / "tensorboard").unlink()
    (work / "runs" / "tensorboard").mkdir()
    (work / "runs" / "tensorboard" / "lora").write_text("mine")
    train_refused(
        "runs/lora",
        "tensorboard",
        "the TensorBoard folder",
        "is a file, not a folder",
    )


def test_a_link_or_an_unwritable_place_for_the_events_is_refused(
    work: Path,
    train_refused: TrainRefused,
) -> None:
    (work / "runs" / "tensorboard").mkdir(parents=True)
    (work / "elsewhere").mkdir()
    (work / "runs" / "tensorboard" / "lora").symlink_to(work / "elsewhere")
    train_refused("runs/lora", "tensorboard", "symbolic link")
    with read_only(work / "locked"):
        train_refused("locked/lora", "tensorboard", "cannot write TensorBoard events to")


def test_another_writers_event_file_is_never_touched(
    work: Path,
    train_refused: TrainRefused,
) -> None:
    events = work / "runs" / "tensorboard" / "lora"
    events.mkdir(parents=True)
    (events / "events.out.tfevents.1700000000.lab.7.0").write_bytes(b"\x00user events\x01")
    for args in (["--report-to", "tensorboard"], ["--report-to", "tensorboard", "--overwrite"]):
        train_refused(
            "runs/lora",
            "tensorboard",
            "holds event files adaptlab did not write",
            "events.out.tfevents.1700000000.lab.7.0",
            extra=args,
        )


def test_a_new_run_replaces_only_its_own_earlier_event_files(tmp_path: Path) -> None:
    earlier = tmp_path / f"events.out.tfevents.1.lab.7.0{EVENTS_MARK}"
    earlier.write_bytes(b"an earlier try")
    (tmp_path / "notes.txt").write_text("mine")
    sink = TensorBoardSink(tmp_path, {"model": "m"})
    sink.close("FINISHED", None)
    assert not earlier.exists() and (tmp_path / "notes.txt").read_text() == "mine"
    (written,) = tmp_path.glob("*tfevents*")
    assert written.name.endswith(EVENTS_MARK)
    assert destinations.foreign_events(tmp_path) == []


def test_a_run_folder_named_tensorboard_is_refused(
    train_refused: TrainRefused,
) -> None:
    train_refused(
        "runs/tensorboard",
        "tensorboard",
        "is named tensorboard",
    )


@pytest.mark.parametrize(
    ("uri", "needle"),
    [
        ("file:///proc/adaptlab-mlruns", "cannot write MLflow's file store /proc/adaptlab-mlruns"),
        ("notes.txt", "notes.txt (MLFLOW_TRACKING_URI, else ./mlruns) is a file"),
        ("file:notes.txt", "is a file, not a folder"),
        ("ftp://lab/mlruns", "MLflow has no store for 'ftp:'"),
        ("http://[::1", "is no URI"),
        (" http://lab:5000", "has spaces around it"),
    ],
)
def test_an_mlflow_store_that_cannot_be_written_is_refused(
    work: Path,
    train_refused: TrainRefused,
    monkeypatch: pytest.MonkeyPatch,
    uri: str,
    needle: str,
) -> None:
    (work / "notes.txt").write_text("mine\n")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    train_refused("runs/lora", "mlflow", needle)


def test_a_read_only_store_and_a_file_named_mlruns_are_refused(
    work: Path,
    train_refused: TrainRefused,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    (work / "mlruns").write_text("not a store\n")
    train_refused("runs/lora", "mlflow", "mlruns", "is a file")
    with read_only(work / "locked") as locked:
        monkeypatch.setenv("MLFLOW_TRACKING_URI", (locked / "mlruns").as_uri())
        train_refused("runs/lora", "mlflow", "cannot write MLflow")


def test_a_file_store_mlflow_is_told_to_refuse_and_one_inside_the_run_are_refused(
    train_refused: TrainRefused,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    train_refused("mlruns/lora", "mlflow", "overlap")
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "false")
    train_refused("runs/lora", "mlflow", "MLFLOW_ALLOW_FILE_STORE")


def test_a_database_store_without_its_package_is_refused(
    train_refused: TrainRefused,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    found = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "sqlalchemy" else found(name, *a),
    )
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "sqlite:///mlflow.db")
    train_refused("runs/lora", "mlflow", "pip install mlflow==")


@pytest.fixture
def closed_port() -> Iterator[int]:
    """A loopback port where nothing listens (bound, so no one else takes it)."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        yield held.getsockname()[1]


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A loopback port that accepts connections and never answers."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        yield server.getsockname()[1]


@pytest.fixture
def quick_probe(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(destinations, "PROBE_SECONDS", 1.0)


def test_a_server_that_is_down_stops_the_run_at_once(
    train_refused: TrainRefused,
    monkeypatch: pytest.MonkeyPatch,
    closed_port: int,
    quick_probe: None,
) -> None:
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"http://lab:secret@127.0.0.1:{closed_port}")
    line = train_refused(
        "runs/lora",
        "mlflow",
        f"MLflow server http://127.0.0.1:{closed_port} does not answer",
        "connection refused",
    )
    assert "secret" not in line


def test_a_server_that_never_answers_stops_the_run_after_the_probe(
    train_refused: TrainRefused,
    monkeypatch: pytest.MonkeyPatch,
    silent_port: int,
    quick_probe: None,
) -> None:
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"http://127.0.0.1:{silent_port}/")
    train_refused(
        "runs/lora",
        "mlflow",
        f"MLflow server http://127.0.0.1:{silent_port}/ does not answer (nothing in 1 s)",
    )


@pytest.mark.parametrize(
    ("value", "needle"),
    [
        ("", "got ''"),
        ("wandb", "got 'wandb'"),
        ("tensorboard,,mlflow", "got ''"),
        ("none,mlflow", "none cannot be given with mlflow"),
        ("TensorBoard", "got 'TensorBoard'"),
        ("x" * 5000, "got 'xxxx"),
    ],
)
def test_report_to_values_are_checked_in_one_short_line(
    train_refused: TrainRefused, value: str, needle: str
) -> None:
    line = train_refused("runs/lora", value, "--report-to", needle)
    assert len(line) < 200


@pytest.mark.parametrize("missing", ("tensorboard", "mlflow"))
def test_a_tracker_not_installed_stops_a_train_and_a_study_before_any_work(
    work: Path,
    train_refused: TrainRefused,
    tiny_model_dir: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    missing: str,
) -> None:
    spec = write_spec(work, tiny_model_dir, "d.csv", methods=["lora"], report_to=[missing])
    found = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == missing else found(name, *a)
    )
    train_refused("runs/lora", missing, "needs `pip install")
    with unchanged(work):
        refused(["study", "run", str(spec), "--no-progress"], capsys, "report_to:", "pip install")


def test_names_mlflow_cannot_keep_are_refused_before_the_run(
    work: Path,
    train_refused: TrainRefused,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    odd = os.fsdecode(b"runs/r\xff")  # a file name whose bytes are not UTF-8
    train_refused(odd, "mlflow", "MLflow run name", "not UTF-8")
    data = work / os.fsdecode(b"d\xfe.csv")
    write_reviews(data)
    train_refused("runs/r", "mlflow", "parameter data", data=str(data))
    monkeypatch.setenv("MLFLOW_EXPERIMENT_NAME", "e" * 501)
    train_refused("runs/r", "mlflow", "501 characters")


def test_odd_characters_in_a_run_name_are_kept_as_they_are(
    work: Path,
    tiny_model_dir: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from mlflow.tracking import MlflowClient

    name = "a b'c\"é$(x)"
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    code, _, err = run_cli(train(tiny_model_dir, f"runs/{name}", "tensorboard,mlflow"), capsys)
    assert code == 0, err
    client = MlflowClient(tracking_uri=(work / "mlruns").as_uri())
    experiment = client.get_experiment_by_name("adaptlab")
    assert experiment is not None
    (run,) = client.search_runs([experiment.experiment_id])
    assert run.info.run_name == name and run.info.status == "FINISHED"
    (events,) = (work / "runs" / "tensorboard" / name).glob("*tfevents*")
    assert events.name.endswith(EVENTS_MARK)


@pytest.mark.parametrize(
    "value", [None, 3, True, {"tensorboard": 1}, ["tensorboard", ["mlflow"]], "", "wandb"]
)
def test_a_studys_report_to_is_checked_in_one_line(
    work: Path, tiny_model_dir: str, capsys: pytest.CaptureFixture[str], value: object
) -> None:
    spec = write_spec(work, tiny_model_dir, "d.csv", methods=["lora"], report_to=value)
    with unchanged(work):
        refused(["study", "run", str(spec), "--no-progress"], capsys, "report_to")


def test_a_study_whose_trackers_cannot_record_is_refused_before_its_store_is_made(
    work: Path,
    tiny_model_dir: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    closed_port: int,
    quick_probe: None,
) -> None:
    spec = write_spec(work, tiny_model_dir, "d.csv", methods=["lora"], report_to="tensorboard")
    (work / "tiny-tensorboard").write_text("mine\n")
    with unchanged(work):
        refused(["study", "run", str(spec), "--no-progress"], capsys, "tiny-tensorboard is a file")
    spec = write_spec(work, tiny_model_dir, "d.csv", methods=["lora"], report_to="mlflow")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"http://127.0.0.1:{closed_port}")
    with unchanged(work):
        refused(["study", "run", str(spec), "--no-progress"], capsys, "does not answer")
    assert not (work / "tiny.db").exists()
