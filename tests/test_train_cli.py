"""Training, evaluation and prediction end to end through the library and the CLI."""

from __future__ import annotations

import csv
import json
import random
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from cli_cases import run_cli
from study_helpers import WORDS, write_reviews

from adaptlab.records.config import TrainConfig
from adaptlab.records.result import read_result
from adaptlab.runs.run import RunSpec, execute


@pytest.fixture(scope="module")
def reviews(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A learnable two-class CSV: the label decides the sentiment words."""
    return write_reviews(tmp_path_factory.mktemp("data") / "reviews.csv", rows=120)


def spec(model: str, data: Path, method: str = "houlsby", **kwargs: Any) -> RunSpec:
    train = TrainConfig(epochs=2, batch_size=8, learning_rate=1e-3, seed=0)
    return RunSpec.build(model, str(data), method, train=train, **kwargs)


def test_run_writes_folder_and_record(tiny_model_dir: str, reviews: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    result = execute(spec(tiny_model_dir, reviews), out, progress=False)
    assert sorted(p.name for p in out.iterdir()) == [
        "adapter",
        "metrics.json",
        "splits.json",
        "train.log",
    ]
    saved = json.loads((out / "metrics.json").read_text())
    assert saved["test"] == result.test
    assert read_result(out / "metrics.json") == replace(result, wall_seconds=saved["wall_seconds"])
    assert [e["epoch"] for e in saved["epochs"]] == [1, 2]
    assert 1 <= saved["best_epoch"] <= 2
    assert saved["spec"]["train"]["learning_rate"] == 1e-3
    assert saved["trainable_parameters"] < saved["total_parameters"]
    assert saved["adapter_bytes"] > 0 and saved["wall_seconds"] > 0
    tensors = (out / "adapter" / "adapter.safetensors").stat().st_size
    # the payload: 4 bytes per trainable float32, the file adds only its JSON header
    assert saved["adapter_tensor_bytes"] == 4 * saved["trainable_parameters"]
    assert saved["adapter_tensor_bytes"] < tensors < saved["adapter_tensor_bytes"] + 64 * 1024
    assert "epoch 2" in (out / "train.log").read_text()
    assert not list(tmp_path.glob(".run.partial-*"))


def test_same_seed_same_metrics(tiny_model_dir: str, reviews: Path) -> None:
    first = execute(spec(tiny_model_dir, reviews, method="lora"), progress=False)
    second = execute(spec(tiny_model_dir, reviews, method="lora"), progress=False)
    losses = [[e.train_loss for e in run.epochs] for run in (first, second)]
    assert losses[0] == losses[1]
    assert first.test == second.test


def test_default_learning_rates_follow_the_paper(tiny_model_dir: str, reviews: Path) -> None:
    assert RunSpec.build(tiny_model_dir, str(reviews), "full").learning_rate() == 2e-5
    assert RunSpec.build(tiny_model_dir, str(reviews), "houlsby").learning_rate() == 1e-4


@pytest.mark.parametrize(
    ("method", "rate"), [("lora", 2e-3), ("houlsby", 1e-3), ("ia3", 3e-2), ("prefix", 5e-4)]
)
def test_tasks_that_generate_take_each_methods_generation_default(method: str, rate: float) -> None:
    from adaptlab.methods.registry import get_method

    config = get_method(method).config_class
    sft = RunSpec.build("m", "qa.jsonl", method, data_options={"task": "sft"})
    assert sft.learning_rate() == rate != config.default_learning_rate
    assert sft.to_dict()["train"]["learning_rate"] == rate
    lm = RunSpec.build("m", "docs.txt", method, data_options={"task": "causal-lm"})
    assert lm.learning_rate() == config.default_learning_rate


def test_cli_train_eval_predict(
    tiny_model_dir: str, reviews: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "cli-run"
    code, stdout, _ = run_cli(
        [
            "train",
            "--model",
            tiny_model_dir,
            "--data",
            str(reviews),
            "--method",
            "lora",
            "-o",
            "rank=4",
            "--epochs",
            "1",
            "--learning-rate",
            "1e-3",
            "--out",
            str(out),
            "--no-progress",
        ],
        capsys,
    )
    assert code == 0 and "best epoch 1" in stdout
    assert "judged by accuracy: test " in stdout and "classes are balanced" in stdout
    manifest = json.loads((out / "adapter" / "manifest.json").read_text())
    assert manifest["methods"][0]["config"]["rank"] == 4
    record = json.loads((out / "metrics.json").read_text())

    code, stdout, _ = run_cli(
        ["eval", "--adapter", str(out), "--data", str(reviews), "--split", "test", "--json"]
        + ["--model", tiny_model_dir],
        capsys,
    )
    assert code == 0
    assert json.loads(stdout)["accuracy"] == pytest.approx(record["test"]["accuracy"])
    assert json.loads(stdout)["judged_by"] == "accuracy"
    code, stdout, _ = run_cli(
        ["eval", "--adapter", str(out), "--data", str(reviews), "--model", tiny_model_dir], capsys
    )
    assert code == 0 and "judged by accuracy: the task's primary metric" in stdout

    texts = tmp_path / "texts.txt"
    texts.write_text("a great film\n\na dull film\n")
    code, stdout, _ = run_cli(
        [
            "predict",
            "--adapter",
            str(out),
            "--input",
            str(texts),
            "--jsonl",
            "--model",
            tiny_model_dir,
        ],
        capsys,
    )
    rows = [json.loads(line) for line in stdout.splitlines()]
    assert code == 0 and len(rows) == 2
    assert all(r["label"] in ("fresh", "rotten") and 0.5 <= r["probability"] <= 1 for r in rows)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--data", "missing.csv"], "missing.csv"),
        (["--method", "adapterz"], "unknown method 'adapterz'"),
        (["--epochs", "0"], "epochs must be a positive integer"),
        (["--train-size", "100000"], "100000"),
        (["--method", "houlsby", "-o", "hidden_size=0"], "hidden_size must be a positive integer"),
        (["--model", "no-such-model-xyz"], "no-such-model-xyz"),
    ],
)
def test_bad_input_is_one_line_and_writes_nothing(
    args: list[str],
    message: str,
    tiny_model_dir: str,
    reviews: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = tmp_path / "never"
    base = {"--model": tiny_model_dir, "--data": str(reviews)}
    for flag, value in zip(args[::2], args[1::2], strict=True):
        base[flag] = value
    argv = ["train", *[x for kv in base.items() for x in kv], "--out", str(out), "--no-progress"]
    code, _, err = run_cli(argv, capsys)
    assert code == 1
    assert message in err and len(err.strip().splitlines()) == 1, err
    assert not out.exists() and not list(tmp_path.glob(".never*"))


def test_existing_output_needs_overwrite(
    tiny_model_dir: str, reviews: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "taken"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    code, _, err = run_cli(
        ["train", "--model", tiny_model_dir, "--data", str(reviews), "--out", str(out)], capsys
    )
    assert code == 1 and "--overwrite" in err
    assert (out / "keep.txt").read_text() == "mine"


def test_nan_loss_stops_with_a_clear_message(tiny_model_dir: str, tmp_path: Path) -> None:
    """Labels too large to square overflow the first step's loss, before any update: the
    message blames the data, not the learning rate."""
    from adaptlab.engine.loop import TrainingError

    path = tmp_path / "scores.csv"
    path.write_text(
        "text,label\n" + "".join(f"text {i},{1e38 * (i % 3 + 1):.1f}\n" for i in range(30))
    )
    with pytest.raises(TrainingError, match="before any update: the learning rate is not the"):
        execute(spec(tiny_model_dir, path, data_options={"task": "regression"}), progress=False)


def test_token_task_trains_reports_span_f1_and_predicts_tags(
    tiny_model_dir: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = []
    for i in range(40):
        lines += [f"{'Paris' if i % 2 else 'Rome'}\tB-LOC", "is\tO", "nice\tO", ""]
    path = tmp_path / "ner.txt"
    path.write_text("\n".join(lines))
    result = execute(
        spec(tiny_model_dir, path, method="lora"), tmp_path / "ner-run", progress=False
    )
    assert result.metric == "span_f1"
    assert {"span_f1", "span_precision", "span_recall"} <= set(result.test)
    texts = tmp_path / "sentences.txt"
    texts.write_text("Rome is nice\n")
    code, stdout, _ = run_cli(
        ["predict", "--adapter", str(tmp_path / "ner-run"), "--input", str(texts)]
        + ["--model", tiny_model_dir],
        capsys,
    )
    assert code == 0
    words = stdout.split()
    assert [w.split("/")[0] for w in words] == ["Rome", "is", "nice"]
    assert all(w.split("/")[1] in ("O", "B-LOC") for w in words)


def test_methods_command_lists_every_method(capsys: pytest.CaptureFixture[str]) -> None:
    code, stdout, _ = run_cli(["methods"], capsys)
    assert code == 0
    for name in ("full", "houlsby", "lora", "bitfit", "lnfit", "freeze", "parallel", "pfeiffer"):
        assert name in stdout


def test_multi_label_and_regression_tasks_train(tiny_model_dir: str, tmp_path: Path) -> None:
    rng = random.Random(1)
    multi = tmp_path / "topics.csv"
    regression = tmp_path / "scores.csv"
    with multi.open("w", newline="") as m_file, regression.open("w", newline="") as r_file:
        m_writer, r_writer = csv.writer(m_file), csv.writer(r_file)
        m_writer.writerow(["text", "label"])
        r_writer.writerow(["text", "label"])
        for i in range(60):
            labels = sorted({"sport" if i % 2 else "politics", *(["money"] if i % 3 == 0 else [])})
            m_writer.writerow([f"story {i} about {' and '.join(labels)}", "|".join(labels)])
            r_writer.writerow([f"{rng.choice(WORDS['fresh'])} film {i}", f"{rng.random() * 5:.3f}"])
    result = execute(spec(tiny_model_dir, multi, method="bitfit"), progress=False)
    assert result.data.task == "multi_label" and result.metric == "mean_rprecision"
    assert 0.0 <= result.test["mean_rprecision"] <= 1.0
    result = execute(spec(tiny_model_dir, regression, method="lnfit"), progress=False)
    assert result.data.task == "regression" and result.metric == "spearman"
    assert -1.0 <= result.test["spearman"] <= 1.0


def test_data_show_lists_splits_label_counts_and_examples(
    reviews: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, stdout, _ = run_cli(["data", "show", str(reviews)], capsys)
    assert code == 0
    rows = {line.split("│")[1].strip(): line for line in stdout.splitlines() if "│" in line}
    counts = {
        name: [int(cell.strip().replace(",", "")) for cell in rows[name].split("│")[2:5]]
        for name in ("examples", "fresh", "rotten")
    }
    assert sum(counts["examples"]) == 120  # train + dev + test: every row once
    assert [f + r for f, r in zip(counts["fresh"], counts["rotten"], strict=True)] == counts[
        "examples"
    ]
    assert stdout.count("'label':") == 2  # two training examples
    code, _, err = run_cli(["data", "show", str(reviews), "--label-column", "stars"], capsys)
    assert code == 1 and "stars" in err and "Traceback" not in err


def test_train_on_skewed_classes_says_it_judges_by_macro_f1(
    tiny_model_dir: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    skewed = tmp_path / "skewed.csv"
    with skewed.open("w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(["text", "label"])
        for i in range(100):
            label = "rotten" if i % 10 == 0 else "fresh"  # 9 to 1
            writer.writerow([f"a {WORDS[label][i % 4]} film", label])
    args = ["train", "--model", tiny_model_dir, "--data", str(skewed), "--method", "bitfit"]
    code, stdout, _ = run_cli(
        [*args, "--epochs", "1", "--out", str(tmp_path / "run"), "--no-progress"], capsys
    )
    assert code == 0
    assert "judged by macro_f1: test " in stdout
    assert "the largest class of the training sample (fresh, " in stdout
    saved = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert saved["data"]["train_counts"]["rotten"] < saved["data"]["train_counts"]["fresh"] / 3
    assert [c["label"] for c in saved["test_classes"]] == ["fresh", "rotten"]


def test_lora_for_a_task_that_generates_adapts_every_linear_layer_at_alpha_two_r() -> None:
    from adaptlab.backbone.roles import ROLES

    def lora(method: object, task: str | None) -> dict[str, object]:
        options = {} if task is None else {"task": task}
        spec = RunSpec.build("m", "d.jsonl", method, data_options=options)  # type: ignore[arg-type]
        return spec.methods[0].to_dict()

    assert lora("lora", "sft") == {"rank": 8, "alpha": 16.0, "dropout": 0.0, "targets": list(ROLES)}
    assert lora({"lora": {"rank": 4}}, "chat")["alpha"] == 8.0
    assert lora({"lora": {"alpha": 4.0, "targets": ["query"]}}, "seq2seq")["targets"] == ["query"]
    assert lora({"lora": {"alpha": 4.0}}, "sft")["alpha"] == 4.0
    assert lora("lora", None)["targets"] == ["query", "value"]
    assert lora("lora", "causal-lm")["targets"] == ["query", "value"]
