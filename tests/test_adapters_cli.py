"""Fusion and stacked runs from the command line, `adapters show`, export, and whose base."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_cases import run_cli
from serve_helpers import write_csv
from tiny_models import save_tiny_bert

from adaptlab.records.config import TrainConfig
from adaptlab.runs.run import RunSpec, execute

TOPICS = {
    "sport": ["goal", "match", "team"],
    "money": ["bank", "price", "market"],
    "law": ["court", "judge", "vote"],
}
MOODS = {"fresh": ["great", "lovely", "fun"], "rotten": ["dull", "awful", "bad"]}


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A tiny model, two data sets, and two trained pfeiffer runs (3 labels and 2 labels)."""
    root = tmp_path_factory.mktemp("adapters-cli")
    model = Path(save_tiny_bert(str(root / "tiny-bert")))
    topics = write_csv(root / "topics.csv", TOPICS, 90)
    reviews = write_csv(root / "reviews.csv", MOODS, 80)
    train = TrainConfig(epochs=1, batch_size=8, learning_rate=1e-3, seed=0)
    for name, data in (("topics-run", topics), ("reviews-run", reviews)):
        spec = RunSpec.build(str(model), str(data), "pfeiffer", train=train)
        execute(spec, root / name, progress=False)
    return {"root": root, "model": model, "topics": topics, "reviews": reviews}


def train_args(setup: dict[str, Path], out: Path, *extra: str) -> list[str]:
    return [
        "train", "--model", str(setup["model"]), "--data", str(setup["reviews"]),
        "--epochs", "1", "--batch-size", "8", "--learning-rate", "1e-3",
        "--out", str(out), "--no-progress", *extra,
    ]  # fmt: skip


def test_a_fusion_run_trains_evaluates_and_shows_its_adapters(
    setup: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    root = setup["root"]
    sources = f"{root / 'topics-run'},{root / 'reviews-run'}"
    out = root / "fusion-run"
    code, stdout, err = run_cli(
        train_args(setup, out, "--method", "fusion", "--adapters", sources, "-o", "temperature=2"),
        capsys,
    )
    assert code == 0, err
    record = json.loads((out / "metrics.json").read_text())
    assert record["spec"]["fuse"] == sources.split(",")
    assert record["parameter_groups"].keys() == {"fusion", "head"}
    manifest = json.loads((out / "adapter" / "manifest.json").read_text())
    assert manifest["kind"] == "fusion" and manifest["fuses"] == ["topics-run", "reviews-run"]

    code, stdout, _ = run_cli(
        ["eval", "--adapter", str(out), "--data", str(setup["reviews"]), "--json"]
        + ["--model", str(setup["model"])],
        capsys,
    )
    assert code == 0
    assert json.loads(stdout)["accuracy"] == pytest.approx(record["test"]["accuracy"])

    code, stdout, _ = run_cli(
        ["analyze", "fusion", "--adapter", str(out), "--data", str(setup["reviews"])]
        + ["--model", str(setup["model"])],
        capsys,
    )
    assert code == 0 and "mean" in stdout
    saved = json.loads((out / "analysis" / "fusion.json").read_text())
    for site in saved["sites"]:
        assert sum(site["weights"].values()) == pytest.approx(1.0)
    assert (out / "analysis" / "fusion.png").is_file()
    code, _, err = run_cli(
        ["analyze", "fusion", "--adapter", str(setup["root"] / "topics-run")]
        + ["--data", str(setup["topics"]), "--model", str(setup["model"])],
        capsys,
    )
    assert code == 1 and "not a fusion run" in err

    code, stdout, _ = run_cli(["adapters", "show", str(out), "--json"], capsys)
    rows = json.loads(stdout)
    assert [r["adapter"] for r in rows] == ["fusion", "  topics-run", "  reviews-run"]
    assert rows[0]["methods"] == "fusion of topics-run, reviews-run"
    assert rows[0]["composition"] == "Fuse('topics-run', 'reviews-run')"
    code, stdout, _ = run_cli(["adapters", "show", str(out)], capsys)
    assert code == 0 and "fusion of" in stdout and "reviews-run" in stdout


def test_a_stacked_run_trains_on_a_frozen_adapter(
    setup: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    root = setup["root"]
    out = root / "stacked-run"
    code, _, err = run_cli(
        train_args(setup, out, "--method", "houlsby", "--stack", str(root / "topics-run")),
        capsys,
    )
    assert code == 0, err
    manifest = json.loads((out / "adapter" / "manifest.json").read_text())
    assert manifest["composition"] == {"stack": ["topics-run", "default"]}
    texts = root / "texts.txt"
    texts.write_text("a great fun\na dull bad\n")
    code, stdout, _ = run_cli(
        ["predict", "--adapter", str(out), "--input", str(texts), "--model", str(setup["model"])],
        capsys,
    )
    assert code == 0 and len(stdout.splitlines()) == 2


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--method", "fusion"], "needs the adapters to fuse"),
        (["--method", "houlsby", "--adapters", "x"], "need --method fusion"),
        (["--method", "fusion", "--adapters", "nowhere"], "no such adapter or run folder"),
    ],
)
def test_bad_composition_options_are_one_line(
    setup: dict[str, Path], extra: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    out = setup["root"] / "refused"
    code, _, err = run_cli(train_args(setup, out, *extra), capsys)
    assert code == 1 and message in err and len(err.strip().splitlines()) == 1
    assert not out.exists()


def test_a_manifest_naming_a_local_folder_needs_the_user_to_confirm_it(
    setup: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    run = setup["root"] / "reviews-run"
    args = ["eval", "--adapter", str(run), "--data", str(setup["reviews"]), "--json"]
    code, _, err = run_cli(args, capsys)
    assert code == 1 and "pass --model" in err and "names the local base model" in err
    manifest_path = run / "adapter" / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    for base in ("../../runs/base", "./tiny-bert"):
        manifest["base_model"]["id"] = base
        manifest_path.write_text(json.dumps(manifest))
        code, _, err = run_cli(args, capsys)
        assert code == 1 and "pass --model" in err
    code, stdout, _ = run_cli([*args, "--model", str(setup["model"])], capsys)
    assert code == 0 and "accuracy" in json.loads(stdout)


def test_export_writes_a_peft_folder_for_lora_and_refuses_others(
    setup: dict[str, Path], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    lora = setup["root"] / "lora-run"
    code, _, err = run_cli(train_args(setup, lora, "--method", "lora"), capsys)
    assert code == 0, err
    model = ["--model", str(setup["model"])]
    code, stdout, _ = run_cli(
        ["export", "--adapter", str(lora), str(tmp_path / "p"), *model], capsys
    )
    assert code == 0 and (tmp_path / "p" / "adapter_config.json").is_file()
    code, _, err = run_cli(
        ["export", "--adapter", str(setup["root"] / "reviews-run"), str(tmp_path / "q"), *model],
        capsys,
    )
    assert code == 1 and "takes a LoRA adapter" in err
    code, stdout, err = run_cli(
        ["import", str(tmp_path / "p"), str(tmp_path / "back"), *model]
        + ["--labels", "fresh,rotten"],
        capsys,
    )
    assert code == 0, err
    manifest = json.loads((tmp_path / "back" / "manifest.json").read_text())
    assert manifest["methods"][0]["name"] == "lora" and manifest["label_names"] == [
        "fresh",
        "rotten",
    ]
