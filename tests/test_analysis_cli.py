"""`adaptlab analyze` on a trained run folder: tables, JSON, PNG, the run's own dev set."""

from __future__ import annotations

import csv
import json
import random
from pathlib import Path

import pytest
from cli_cases import run_cli
from tiny_models import save_tiny_bert

import adaptlab
from adaptlab.analysis import load_target
from adaptlab.models.loading import load_model
from adaptlab.records.config import TrainConfig
from adaptlab.records.result import RunResult
from adaptlab.runs.evaluation import evaluate
from adaptlab.runs.run import RunSpec, execute

WORDS = {"fresh": ["great", "lovely", "superb", "fun"], "rotten": ["dull", "awful", "bad"]}


@pytest.fixture(scope="module")
def run_folder(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, RunResult]:
    """A houlsby run (tiny BERT, 40 training examples), its data file and its result."""
    root = tmp_path_factory.mktemp("analysis")
    rng = random.Random(0)
    data = root / "reviews.csv"
    with data.open("w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(["text", "label"])
        for i in range(160):
            label = "fresh" if i % 2 else "rotten"
            words = " ".join(rng.choice(WORDS[label]) for _ in range(1 + i % 5))
            writer.writerow([f"a {words} film", label])
    model = save_tiny_bert(str(root / "tiny-bert"))
    train = TrainConfig(epochs=2, batch_size=8, learning_rate=1e-3, seed=4)
    spec = RunSpec.build(model, str(data), "houlsby", train_size=40, train=train)
    record = execute(spec, root / "run", progress=False)
    return root / "run", data, record


@pytest.mark.parametrize("measure", ["rsa", "cka"])
def test_similarity_prints_one_line_per_layer_and_writes_json_and_png(
    run_folder: tuple[Path, Path, RunResult], measure: str, capsys: pytest.CaptureFixture[str]
) -> None:
    run, data, _ = run_folder
    args = ["analyze", measure, "--adapter", str(run), "--data", str(data), "--tokens", "60"]
    args += ["--model", str(run.parent / "tiny-bert")]
    code, out, _ = run_cli([*args, "--no-progress"], capsys)
    assert code == 0
    saved = json.loads((run / "analysis" / f"{measure}.json").read_text())
    assert saved["measure"] == measure and saved["tokens"] == 60
    assert "40 examples, the run's own split" in saved["data"]
    assert [row["layer"] for row in saved["layers"]] == [0, 1, 2]
    assert all(0.0 <= row["score"] <= 1.0 + 1e-9 for row in saved["layers"])
    assert saved["layers"][0]["score"] == pytest.approx(1.0, abs=1e-6)  # embeddings untouched
    assert (run / "analysis" / f"{measure}.png").read_bytes()[:4] == b"\x89PNG"
    for row in saved["layers"]:
        assert row["module"] in out


def test_landscape_at_one_is_the_runs_best_dev_loss(
    run_folder: tuple[Path, Path, RunResult], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run, data, record = run_folder
    args = ["analyze", "landscape", "--adapter", str(run), "--data", str(data)]
    args += ["--model", str(run.parent / "tiny-bert")]
    code, out, _ = run_cli(
        [*args, "--points", "3", "--out", str(tmp_path), "--no-progress"], capsys
    )
    assert code == 0
    saved = json.loads((tmp_path / "landscape.json").read_text())
    assert saved["alphas"] == [-2.0, 0.0, 1.0, 2.0]
    assert saved["losses"][2] == pytest.approx(record.best.dev_loss, abs=1e-5)
    assert (tmp_path / "landscape.png").is_file()
    assert "+1.000" in out
    # a = 0 is the model as training started, head included
    target = load_target(run, str(data), model=str(run.parent / "tiny-bert"))
    labels = record.data.labels
    start = load_model(record.spec.model, "single_label", label_names=labels, seed=4)
    adaptlab.adapt(start.model, "houlsby", seed=4)
    fresh = evaluate(start.model, target.encoder, target.features, "single_label", labels)
    assert saved["losses"][1] == pytest.approx(fresh.loss, abs=1e-5)


def test_user_errors_are_one_line(
    run_folder: tuple[Path, Path, RunResult], capsys: pytest.CaptureFixture[str]
) -> None:
    run, data, _ = run_folder
    base = ["analyze", "rsa", "--adapter", str(run), "--data", str(data), "--no-progress"]
    base += ["--model", str(run.parent / "tiny-bert")]
    code, _, err = run_cli([*base, "--tokens", "100000"], capsys)
    assert code == 1 and "pass --tokens" in err and len(err.strip().splitlines()) == 1
    code, _, err = run_cli([*base, "--split", "valid"], capsys)
    assert code == 1 and "--split must be one of" in err
    code, _, err = run_cli([*base[:3], str(run / "nothing"), *base[4:]], capsys)
    assert code == 1 and "no such adapter" in err


def test_the_runs_own_split_is_found_from_its_adapter_folder_and_another_spelling(
    run_folder: tuple[Path, Path, RunResult], monkeypatch: pytest.MonkeyPatch
) -> None:
    run, data, _ = run_folder
    monkeypatch.chdir(data.parent)
    for adapter, spelling in ((run / "adapter", str(data)), (run, f"./{data.name}")):
        target = load_target(adapter, spelling, model=str(run.parent / "tiny-bert"))
        assert "40 examples, the run's own split" in target.data, (adapter, spelling)
