"""A sequence study on the Ray executor: each sequence one Ray task on a local 2-CPU Ray, its
state beside the store, its stages written by the driver when its outcome comes back; the
same sequences and matrices as the local executor, and a stopped sequence goes on from its
last finished stage."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console
from sequence_study_helpers import write_sequence_spec, write_stages
from study_helpers import integrity, one_thread
from tiny_models import save_tiny_bert

from adaptlab.continual.checkpoint import SequenceCheckpoint
from adaptlab.continual.result import StageOutcome
from adaptlab.continual.run import run_sequence
from adaptlab.study.executors import LocalExecutor
from adaptlab.study.kind_sequences import sequence_folders
from adaptlab.study.ray_executor import RayExecutor
from adaptlab.study.runner import run_study
from adaptlab.study.sequence_plan import plan_sequences
from adaptlab.study.spec import Resources, load_spec
from adaptlab.study.status import study_status
from adaptlab.study.store import ResultStore, load_sequences


def stop_after_two_stages(index: int, outcome: StageOutcome) -> None:
    """Stop a sequence as Ctrl-C would once its second stage is kept."""
    if index == 1:
        raise KeyboardInterrupt


@pytest.mark.ray
def test_a_sequence_study_on_ray_ends_as_on_the_local_executor(
    local_ray: None, tmp_path: Path
) -> None:
    model = save_tiny_bert(str(tmp_path / "tiny-bert"))
    stages = write_stages(tmp_path)
    keys = {"single_stage": True, "test_size": 10}
    for folder in ("local", "ray"):
        (tmp_path / folder).mkdir()
    local = write_sequence_spec(tmp_path / "local", model, stages, **keys)
    on_ray = write_sequence_spec(tmp_path / "ray", model, stages, **keys)
    with one_thread():
        run_study(local, executor=LocalExecutor(progress=False))

    # The replay sequence was stopped after two of its three stages: its state is beside the
    # store, where its Ray task finds it.
    store = tmp_path / "ray" / "cl.db"
    sequential, replay = plan_sequences(load_spec(on_ray), on_ray.parent)
    kept = sequence_folders(store) / replay.run_id
    with one_thread(), pytest.raises(KeyboardInterrupt):
        run_sequence(replay.spec, progress=False, checkpoint=kept, on_stage=stop_after_two_stages)
    assert len(SequenceCheckpoint.open(kept, replay.spec).completed) == 2

    shown = io.StringIO()
    console = Console(file=shown, width=200)
    summary = run_study(on_ray, executor=RayExecutor(Resources(cpus=1)), console=console)
    assert len(summary.outcomes) == 2 and not summary.failed, summary.failed
    lines = shown.getvalue()
    assert "2 sequences, 0 already done, 2 to run (ray executor)" in lines
    assert f"{replay.run_id} resumed after stage 2/3" in lines
    assert lines.count("stage 3/3 ") == 2 and lines.count("stage 1/3 ") == 1

    alone = {s.run_id: s for s in load_sequences(tmp_path / "local" / "cl.db", planned_only=True)}
    shared = load_sequences(store, planned_only=True)
    assert [s.run_id for s in shared] == [sequential.run_id, replay.run_id] == list(alone)
    with ResultStore(store, create=False) as results:
        for stored in shared:
            result, expected = stored.result, alone[stored.run_id].result
            assert stored.strategy_label == alone[stored.run_id].strategy_label
            assert len(result.matrix) == 3
            for row, local_row in zip(result.matrix, expected.matrix, strict=True):
                assert row == pytest.approx(local_row, rel=1e-4)
            assert result.single_stage == pytest.approx(expected.single_stage, rel=1e-4)
            rows = results.stages(stored.run_id)  # written by the driver from the outcome
            assert [outcome.row("accuracy") for outcome, _ in rows] == list(result.matrix)
            assert [outcome.record for outcome, _ in rows] == list(result.stages)
    assert not sequence_folders(store).exists()  # every sequence stored: no state kept
    (status,) = study_status(store)
    assert (status.done, status.stages, status.stages_done) == (2, 6, 6)
    assert integrity(store) == "ok"

    again = run_study(on_ray, executor=RayExecutor(Resources(cpus=1)), console=console)
    assert again.outcomes == [] and again.done_before == 2
