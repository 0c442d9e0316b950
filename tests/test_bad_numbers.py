"""Bad numbers on every numeric option: one line naming the option, exit 1, before any work.

Each CLI case names a model, adapter or data set that does not exist: had the command started
working before checking its numbers, the error would name that path instead. Nothing on disk
changes. The library functions behind the options refuse the same values.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from cli_cases import refused, unchanged, write_reviews
from tiny_models import save_tiny_bert

from adaptlab.analysis.landscape import alphas
from adaptlab.analysis.tokens import sample_tokens
from adaptlab.checks import MAX_SEED
from adaptlab.engine.batches import batches
from adaptlab.errors import ConfigError
from adaptlab.models.loading import head_config
from adaptlab.records.config import TrainConfig
from adaptlab.select import FeatureOptions
from adaptlab.study.spec import load_spec

HUGE = "99999999999999999999"
TRAIN = ["train", "--model", "nowhere/model", "--data", "nowhere.csv", "--out", "run"]
EVAL = ["eval", "--adapter", "nowhere", "--data", "nowhere.csv"]
PREDICT = ["predict", "--adapter", "nowhere", "--input", "nowhere.txt"]
RSA = ["analyze", "rsa", "--adapter", "nowhere", "--data", "nowhere.csv"]
CKA = ["analyze", "cka", "--adapter", "nowhere", "--data", "nowhere.csv"]
LANDSCAPE = ["analyze", "landscape", "--adapter", "nowhere", "--data", "nowhere.csv"]
RANK = ["rank", "--models", "nowhere/model", "--data", "nowhere.csv"]
FUSION = ["analyze", "fusion", "--adapter", "nowhere", "--data", "nowhere.csv"]

CASES = {
    "eval --batch-size 0": ([*EVAL, "--batch-size", "0"], "--batch-size must be a positive"),
    "eval --batch-size -1": ([*EVAL, "--batch-size", "-1"], "--batch-size must be a positive"),
    "eval --max-length 1": ([*EVAL, "--max-length", "1"], "--max-length must be an integer >= 2"),
    "predict --batch-size 0": ([*PREDICT, "--batch-size", "0"], "--batch-size must be"),
    "predict --batch-size -1": ([*PREDICT, "--batch-size", "-1"], "--batch-size must be"),
    "predict --max-length 0": ([*PREDICT, "--max-length", "0"], "--max-length must be"),
    "landscape --batch-size 0": ([*LANDSCAPE, "--batch-size", "0"], "--batch-size must be"),
    "landscape --batch-size -1": ([*LANDSCAPE, "--batch-size", "-1"], "--batch-size must be"),
    "landscape --span nan": ([*LANDSCAPE, "--span", "nan"], "--span must be a finite number"),
    "landscape --span inf": ([*LANDSCAPE, "--span", "inf"], "--span must be a finite number"),
    "landscape --span -inf": ([*LANDSCAPE, "--span", "-inf"], "--span must be a finite number"),
    "landscape --span 0": ([*LANDSCAPE, "--span", "0"], "--span must be a finite number > 0"),
    "landscape --span -2": ([*LANDSCAPE, "--span", "-2"], "--span must be a finite number > 0"),
    "landscape --points 1": ([*LANDSCAPE, "--points", "1"], "--points must be an integer >= 2"),
    "landscape --points -5": ([*LANDSCAPE, "--points", "-5"], "--points must be"),
    "fusion --batch-size 0": ([*FUSION, "--batch-size", "0"], "--batch-size must be a positive"),
    "rsa --tokens 1": ([*RSA, "--tokens", "1"], "--tokens must be an integer >= 2"),
    "rsa --seed huge": ([*RSA, "--seed", HUGE], f"--seed must be an integer from 0 to {MAX_SEED}"),
    "rsa --seed -1": ([*RSA, "--seed", "-1"], "--seed must be an integer from 0"),
    "cka --tokens -3": ([*CKA, "--tokens", "-3"], "--tokens must be"),
    "cka --seed huge": ([*CKA, "--seed", HUGE], "--seed must be an integer from 0"),
    "train --seed huge": ([*TRAIN, "--seed", HUGE], f"got {HUGE}"),
    "train --seed 2**32": ([*TRAIN, "--seed", str(2**32)], "--seed must be an integer from 0"),
    "train --seed -1": ([*TRAIN, "--seed", "-1"], "--seed must be an integer from 0"),
    "train --epochs 0": ([*TRAIN, "--epochs", "0"], "--epochs must be a positive integer"),
    "train --batch-size 0": ([*TRAIN, "--batch-size", "0"], "--batch-size must be a positive"),
    "train --batch-size -1": ([*TRAIN, "--batch-size", "-1"], "--batch-size must be a positive"),
    "train --train-size 0": ([*TRAIN, "--train-size", "0"], "--train-size must be a positive"),
    "train --train-size -5": ([*TRAIN, "--train-size", "-5"], "--train-size must be a positive"),
    "train --max-length 0": ([*TRAIN, "--max-length", "0"], "--max-length must be"),
    "train --learning-rate nan": ([*TRAIN, "--learning-rate", "nan"], "learning-rate must be in"),
    "train --learning-rate 0": ([*TRAIN, "--learning-rate", "0"], "learning-rate must be in"),
    "train --warmup-ratio nan": ([*TRAIN, "--warmup-ratio", "nan"], "warmup-ratio must be in"),
    "train --warmup-ratio -0.1": ([*TRAIN, "--warmup-ratio", "-0.1"], "warmup-ratio must be in"),
    "rank --seed -1": ([*RANK, "--seed", "-1"], "--seed must be an integer from 0"),
    "rank --seed huge": ([*RANK, "--seed", HUGE], "--seed must be an integer from 0"),
    "rank --batch-size 0": ([*RANK, "--batch-size", "0"], "--batch-size must be a positive"),
    "rank --sample -1": ([*RANK, "--sample", "-1"], "--sample must be an integer >= 0"),
    "rank --max-length 1": ([*RANK, "--max-length", "1"], "--max-length must be"),
    "methods --num-labels 0": (["methods", "--num-labels", "0"], "--num-labels must be"),
    "methods --num-labels -1": (["methods", "--num-labels", "-1"], "--num-labels must be"),
    "study run --ray-cpus 0": (
        ["study", "run", "nowhere.yaml", "--ray-cpus", "0"],
        "--ray-cpus must be a positive",
    ),
}


@pytest.mark.parametrize("args, message", CASES.values(), ids=CASES.keys())
def test_a_bad_number_is_refused_before_any_work(
    args: list[str],
    message: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "keep.txt").write_text("a file the command must leave alone\n")
    with unchanged(tmp_path):
        refused(args, capsys, message)


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> str:
    return save_tiny_bert(str(tmp_path_factory.mktemp("tiny-bert")))


def test_a_head_of_a_trillion_labels_is_refused_not_allocated(
    tiny_model: str, capsys: pytest.CaptureFixture[str]
) -> None:
    refused(
        ["methods", "--model", tiny_model, "--num-labels", str(10**12)],
        capsys,
        "a single_label head needs 2 to 1,000,000 labels, got 1,000,000,000,000",
    )


def test_a_max_length_longer_than_the_model_takes_is_refused_before_training(
    tiny_model: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = write_reviews(tmp_path / "reviews.csv")
    with unchanged(tmp_path):
        refused(
            ["train", "--model", tiny_model, "--data", str(data), "--out", str(tmp_path / "r")]
            + ["--max-length", "100000", "--no-progress"],
            capsys,
            "max_length 100000 is more than the 512 tokens this model takes",
        )


@pytest.mark.parametrize(
    "options, message",
    [
        ({"seed": 2**40}, "seed must be an integer from 0"),
        ({"seed": -1}, "seed must be an integer from 0"),
        ({"batch_size": 0}, "batch-size must be a positive integer"),
        ({"eval_batch_size": -1}, "eval-batch-size must be a positive integer"),
        ({"max_length": 1}, "max-length must be an integer >= 2"),
        ({"weight_decay": math.nan}, "weight-decay must be >= 0"),
        ({"max_grad_norm": math.nan}, "max-grad-norm must be > 0"),
        ({"max_grad_norm": math.inf}, "max-grad-norm must be > 0"),
    ],
)
def test_train_config_refuses_what_the_options_refuse(
    options: dict[str, float], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        TrainConfig(**options)  # type: ignore[arg-type]


def test_the_library_refuses_the_same_numbers() -> None:
    with pytest.raises(ConfigError, match="batch size must be a positive integer, got 0"):
        next(batches(None, [], 0, None))  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="--span must be a finite number > 0, got nan"):
        alphas(5, math.nan)
    with pytest.raises(ConfigError, match="--seed must be an integer from 0"):
        sample_tokens([{"input_ids": [5, 6, 7]}], set(), 2, seed=2**64)
    with pytest.raises(ConfigError, match="--sample must be a positive integer"):
        FeatureOptions(sample=0)
    with pytest.raises(ConfigError, match="--batch-size must be a positive integer"):
        FeatureOptions(batch_size=-1)
    with pytest.raises(ConfigError, match="1,000,000 labels"):
        head_config("single_label", None, 10**12)


@pytest.mark.parametrize(
    "line, message",
    [
        (f"seeds: [0, {HUGE}]", r"s.yaml line 5, seeds\[1\]: .* 4294967295"),
        ("max_length: 1", r"s.yaml line 5, max_length: .* greater than or equal to 2"),
        ("seeds: [-1]", r"s.yaml line 5, seeds\[0\]: .* greater than or equal to 0"),
    ],
)
def test_a_spec_number_out_of_range_names_its_line(line: str, message: str, tmp_path: Path) -> None:
    spec = tmp_path / "s.yaml"
    spec.write_text(f"name: s\nmodels: [m]\ndata: [d]\nmethods: [lora]\n{line}\n")
    with pytest.raises(ConfigError, match=message):
        load_spec(spec)
