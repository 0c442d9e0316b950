"""Folders written before the engine was split into rooms keep loading: a run folder (bitfit on a
tiny BERT) and a causal-LM sequence folder (LoRA on a tiny Llama, with its adapter), both
written by adaptlab as it was before, stored in `fixtures/written-before/`. The run's record
reads back, its adapter evaluates to the test loss it recorded, the sequence's record reads
back, and its adapter loads on the base it names."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from cli_cases import run_cli, write_reviews
from tiny_models import save_tiny_bert, save_tiny_llama

from adaptlab.continual.result import SequenceResult
from adaptlab.continual.run import SEQUENCE_FILE
from adaptlab.methods.adapter_loading import load_adapter
from adaptlab.models.loading import load_model
from adaptlab.records.result import read_result

BEFORE = Path(__file__).parent / "fixtures" / "written-before"


@pytest.fixture
def folders(tmp_path: Path) -> Path:
    """A copy of the stored folders, and the tiny models and data they were trained on."""
    shutil.copytree(BEFORE, tmp_path / "before")
    save_tiny_bert(str(tmp_path / "bert"))
    save_tiny_llama(str(tmp_path / "llama"))
    write_reviews(tmp_path / "reviews.csv", rows=60)
    return tmp_path


def test_a_run_folder_written_before_reads_and_evaluates_as_recorded(
    folders: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = folders / "before" / "run"
    result = read_result(run / "metrics.json")
    assert result.spec.methods[0].name == "bitfit" and result.data.task == "single_label"
    code, out, err = run_cli(
        ["eval", "--adapter", str(run), "--model", str(folders / "bert"),
         "--data", str(folders / "reviews.csv"), "--split", "test", "--json"],
        capsys,
    )  # fmt: skip
    assert code == 0, err
    scored = json.loads(out)
    assert set(result.test) <= set(scored)
    assert scored["loss"] == pytest.approx(result.test_loss, rel=1e-4)


def test_a_sequence_folder_written_before_reads_and_its_adapter_loads(folders: Path) -> None:
    sequence = folders / "before" / "sequence"
    record = json.loads((sequence / SEQUENCE_FILE).read_text(encoding="utf-8"))
    result = SequenceResult.from_dict(record)
    assert result.spec.objective == "causal-lm"
    assert len(result.matrix) == len(result.spec.stages) == 2
    model = load_model(str(folders / "llama"), "causal_lm").model
    load_adapter(model, sequence / "adapter")
    assert any("lora" in name for name, _ in model.named_parameters())
