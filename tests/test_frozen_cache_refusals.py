"""--frozen-cache memory or disk where nothing is frozen, or for a run that replays nothing, is
refused in one line before anything runs, by `adaptlab train` and by the library alike; auto
and off train on without a word."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_cases import refused, run_cli, unchanged, write_reviews
from tiny_models import save_tiny_bert, tiny_model

import adaptlab
from adaptlab.errors import ConfigError
from adaptlab.methods.frozen_cache import FrozenCache, check_mode
from adaptlab.records.combining import CombineRecipe, SourceFolder
from adaptlab.records.config import TrainConfig
from adaptlab.records.spec import RunSpec
from adaptlab.runs.run import execute

Capture = pytest.CaptureFixture[str]

NOTHING_FROZEN = "has nothing to cache: the method trains from the first block"
TRAIN = TrainConfig(epochs=1, batch_size=16, learning_rate=1e-3, seed=0)


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with a tiny BERT model folder and a reviews CSV."""
    folder = tmp_path_factory.mktemp("work")
    save_tiny_bert(str(folder / "bert"))
    write_reviews(folder / "reviews.csv", rows=32)
    return folder


def train_args(work: Path, out: Path, *extra: str) -> list[str]:
    return [
        *["train", "--model", str(work / "bert"), "--data", str(work / "reviews.csv")],
        *["--out", str(out), "--epochs", "1", "--batch-size", "16", "--no-progress", *extra],
    ]


@pytest.mark.parametrize(
    "extra",
    [
        ["--method", "lora", "--frozen-cache", "memory"],
        ["--method", "full", "--frozen-cache", "disk"],
        ["--method", "freeze", "-o", "k=0", "--frozen-cache", "memory"],
    ],
    ids=["lora-memory", "full-disk", "freeze-k0-memory"],
)
def test_train_refuses_a_cache_where_nothing_is_frozen(
    work: Path, tmp_path: Path, capsys: Capture, extra: list[str]
) -> None:
    mode = extra[-1]
    with unchanged(work):
        refused(
            train_args(work, tmp_path / "run", *extra),
            capsys,
            f"--frozen-cache {mode} " + NOTHING_FROZEN,
        )
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("mode", ["auto", "off"])
def test_auto_and_off_train_on_where_nothing_is_frozen(
    work: Path, tmp_path: Path, capsys: Capture, mode: str
) -> None:
    args = train_args(work, tmp_path / "run", "--method", "lora", "--frozen-cache", mode)
    code, _, err = run_cli(args, capsys)
    assert code == 0, err
    assert "frozen" not in err
    assert (tmp_path / "run" / "metrics.json").is_file()


def test_execute_refuses_a_cache_where_nothing_is_frozen(work: Path, tmp_path: Path) -> None:
    spec = RunSpec.build(str(work / "bert"), str(work / "reviews.csv"), "lora", train=TRAIN)
    with unchanged(work), pytest.raises(ConfigError, match=f"--frozen-cache disk {NOTHING_FROZEN}"):
        execute(spec, tmp_path / "run", progress=False, frozen_cache="disk")
    assert not list(tmp_path.iterdir())


def test_execute_refuses_a_cache_for_a_task_that_replays_nothing(tmp_path: Path) -> None:
    spec = RunSpec.build("minilm-l6", "notes.txt", "lora", data_options={"task": "mlm"})
    with pytest.raises(ConfigError, match="--frozen-cache is for runs of a labelled task") as e:
        execute(spec, tmp_path / "run", frozen_cache="off")
    assert str(e.value).endswith("this one is an mlm run")
    assert not list(tmp_path.iterdir())


def test_execute_refuses_a_cache_for_a_run_that_trains_nothing() -> None:
    recipe = CombineRecipe(
        "linear", (SourceFolder("a", "/x/a", 0.5), SourceFolder("b", "/x/b", 0.5)), head="a"
    )
    spec = RunSpec("minilm-l6", "rotten-tomatoes", (), train=TRAIN, combine=recipe)
    with pytest.raises(ConfigError, match="trains nothing takes no frozen_cache"):
        execute(spec, frozen_cache="memory")


@pytest.mark.parametrize(
    ("method", "options", "refuses"),
    [("lora", {}, True), ("freeze", {"k": 0}, True), ("freeze", {"k": 1}, False)],
)
def test_the_cache_refuses_memory_and_disk_only_where_nothing_is_frozen(
    method: str, options: dict[str, int], refuses: bool
) -> None:
    model = tiny_model("bert")
    adaptlab.adapt(model, method, **options)
    for mode in ("auto", "off"):
        check_mode(model, mode)
    for mode in ("memory", "disk"):
        if refuses:
            with pytest.raises(ConfigError, match=NOTHING_FROZEN):
                FrozenCache.create(model, mode, [])
        else:
            check_mode(model, mode)


def test_a_model_without_an_adapter_has_nothing_to_cache() -> None:
    with pytest.raises(ConfigError, match=f"--frozen-cache memory {NOTHING_FROZEN}"):
        check_mode(tiny_model("bert"), "memory")
