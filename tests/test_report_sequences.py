"""The report of a sequence study: a heat map per strategy and the table of scores, with the
numbers of a hand-made store."""

from __future__ import annotations

import base64
import re
from pathlib import Path

import pytest

from adaptlab.cli.app import main
from adaptlab.continual import SequenceResult, SequenceSpec, StageRecord, summarize
from adaptlab.records.config import TrainConfig
from adaptlab.records.result import EpochRecord
from adaptlab.records.versions import Versions
from adaptlab.report.continual import arms
from adaptlab.study.sequence_plan import PlannedSequence, sequence_id
from adaptlab.study.store import ResultStore, load_sequences

STAGES = ("news", "reviews")


def sequence(strategy: str, seed: int, matrix: list[list[float]], single: list[float] | None):
    """A finished two-stage sequence with the accuracy matrix `matrix` (hand-made numbers)."""
    spec = SequenceSpec.build(
        "tiny-bert", STAGES, "houlsby", strategy, train=TrainConfig(epochs=1, seed=seed)
    )
    epoch = EpochRecord(1, 3, 0.7, 0.6, {"accuracy": 0.5}, 0.1)
    stages = tuple(
        StageRecord(name, ("a", "b"), {"train": 8, "dev": 8, "test": 8}, (epoch,), 1, 10, 0.2)
        for name in STAGES
    )
    tests = tuple(tuple({"accuracy": value, "loss": 0.5} for value in row) for row in matrix)
    result = SequenceResult(
        spec=spec,
        stages=stages,
        metric="accuracy",
        matrix=tuple(tuple(row) for row in matrix),
        tests=tests,
        scores=summarize(matrix, single),
        versions=Versions.current(),
        single_stage=None if single is None else tuple(single),
        wall_seconds=1.0,
    )
    planned = PlannedSequence(sequence_id(spec), "cl", "houlsby", strategy, spec)
    return planned, result


@pytest.fixture
def store(tmp_path: Path) -> Path:
    path = tmp_path / "cl.db"
    made = [
        sequence("sequential", 0, [[0.9, 0.5], [0.6, 0.8]], [0.9, 0.7]),
        sequence("sequential", 1, [[0.8, 0.5], [0.4, 0.9]], [0.8, 0.9]),
        sequence("adapter-per-stage", 0, [[0.9, 0.5], [0.9, 0.8]], None),
    ]
    with ResultStore(path) as results:
        results.set_plan("cl", [planned for planned, _ in made])
        for planned, result in made:
            results.start(planned)
            results.finish_sequence(planned.run_id, result)
    return path


def test_the_report_draws_each_strategys_matrix_and_tabulates_its_scores(
    store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as done:
        main(["study", "report", str(store)])
    assert done.value.code == 0
    assert "report of 3 sequences written to" in capsys.readouterr().out
    page = (store.with_suffix(".html")).read_text()
    section = page[page.index('<section id="continual">') :]
    rows = re.findall(r"<tr><td>(.*?)</td></tr>", section.replace("\n", ""))
    cells = [row.split("</td><td>") for row in rows]
    assert cells == [
        [
            "houlsby · sequential",
            "2",
            "0.675 ± 0.035",
            "-0.350 ± 0.071",
            "+0.050 ± 0.071",
            "+0.350 ± 0.071",
        ],
        [
            "houlsby · adapter-per-stage",
            "1",
            "0.850 ± 0.000",
            "+0.000 ± 0.000",
            "–",
            "+0.000 ± 0.000",
        ],
    ]
    images = re.findall(r'<img src="data:image/svg\+xml;base64,([^"]+)" alt="([^"]+)"', section)
    assert [alt for _, alt in images] == [
        "accuracy matrix of houlsby · sequential",
        "accuracy matrix of houlsby · adapter-per-stage",
    ]
    assert all(base64.b64decode(data).startswith(b"<?xml") for data, _ in images)
    assert "news → reviews" in section


def test_the_heat_map_holds_the_mean_over_seeds(store: Path) -> None:
    sequential, per_stage = arms(load_sequences(store))
    assert sum(sequential.mean_matrix(), []) == pytest.approx([0.85, 0.5, 0.5, 0.85])
    assert sum(per_stage.mean_matrix(), []) == pytest.approx([0.9, 0.5, 0.9, 0.8])
    assert sequential.stages == STAGES
