"""A sequence stopped after a stage goes on from its checkpoint: the finished stages are not
trained again, and the result is the one an uninterrupted sequence gives."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
from study_helpers import one_thread
from test_continual_sequence import sequence, write_stage
from tiny_models import save_tiny_bert

from adaptlab.continual import SequenceSpec, run_sequence
from adaptlab.continual.checkpoint import STATE_FILE, SequenceCheckpoint
from adaptlab.continual.result import SequenceResult, StageOutcome
from adaptlab.errors import ConfigError


class Stop(Exception):
    """Stands for the process dying after a stage."""


@dataclass(frozen=True)
class Resumed:
    """A sequence run whole, and run with checkpoints, stopped after its first stage and
    resumed: `saved` the first stage's record and files as the stop left them, `trained` the
    stages the resumed run trained."""

    whole: SequenceResult
    resumed: SequenceResult
    saved: StageOutcome
    saved_files: list[str]
    trained: list[int]


def stopped_and_resumed(spec: SequenceSpec, folder: Path) -> Resumed:
    """Run `spec` whole, then with checkpoints in `folder`, stopped after its first stage,
    then resumed from `folder`."""

    def stop(index: int, outcome: StageOutcome) -> None:
        raise Stop

    with one_thread():
        whole = run_sequence(spec, progress=False)
        with pytest.raises(Stop):
            run_sequence(spec, progress=False, checkpoint=folder, on_stage=stop)
        (saved,) = SequenceCheckpoint.open(folder, spec).completed
        files = sorted(path.name for path in (folder / "stage-0").iterdir())
        trained: list[int] = []
        resumed = run_sequence(
            spec, progress=False, checkpoint=folder, on_stage=lambda i, _: trained.append(i)
        )
    return Resumed(whole, resumed, saved, files, trained)


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, tuple[str, str]]:
    folder = tmp_path_factory.mktemp("resume")
    model = save_tiny_bert(str(folder / "tiny-bert"))
    return model, (write_stage(folder, "sentiment"), write_stage(folder, "topic"))


@pytest.mark.parametrize("strategy", ["replay", "adapter-per-stage", "ewc"])
def test_a_sequence_stopped_after_a_stage_resumes_from_it(
    setup: tuple[str, tuple[str, str]], tmp_path: Path, strategy: str
) -> None:
    model, stages = setup
    options = {"rate": 0.5} if strategy == "replay" else {}
    spec = sequence(model, stages, strategy, **options)
    run = stopped_and_resumed(spec, tmp_path)
    whole, resumed = run.whole, run.resumed
    assert STATE_FILE in run.saved_files
    assert run.trained == [1]  # stage 0 was not trained again
    assert resumed.stages[0] == run.saved.record  # its record, seconds included, is the saved one
    assert [sorted(p.name for p in tmp_path.iterdir())] == [["stage-1"]]
    losses = [[cell["loss"] for cell in row] for row in whole.tests]  # finer than accuracy
    for row, expected in zip(resumed.tests, losses, strict=True):
        assert [cell["loss"] for cell in row] == pytest.approx(expected, abs=1e-5)
    assert resumed.matrix == whole.matrix
    assert [s.best_epoch for s in resumed.stages] == [s.best_epoch for s in whole.stages]


def test_a_checkpoint_of_another_sequence_is_refused(
    setup: tuple[str, tuple[str, str]], tmp_path: Path
) -> None:
    model, stages = setup
    spec = sequence(model, stages, "sequential")
    other = sequence(model, stages, "replay")
    with one_thread():
        run_sequence(spec, progress=False, checkpoint=tmp_path)
        with pytest.raises(ConfigError, match="holds the state of another sequence"):
            run_sequence(other, progress=False, checkpoint=tmp_path)


def test_a_sequence_result_reads_back_from_its_json(
    setup: tuple[str, tuple[str, str]],
) -> None:
    model, stages = setup
    spec = sequence(model, stages, "kd-logit", temperature=3.0)
    with one_thread():
        result = run_sequence(spec, progress=False)
    again = SequenceResult.from_dict(result.to_dict())
    assert again.to_dict() == result.to_dict()
    with pytest.raises(ConfigError, match="stages\\[0\\].*best_epoch"):
        data = result.to_dict()
        data["stages"][0]["best_epoch"] = 99
        SequenceResult.from_dict(data)
