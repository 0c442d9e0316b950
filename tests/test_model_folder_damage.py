"""A base model folder is untrusted input like an adapter folder: damaged, missing or unreadable
weights and JSON files end in one line naming the file (exit 1, nothing changed), in every
command that reads a model folder, and so does a built-in model's damaged cache folder."""

from __future__ import annotations

import importlib.util
import json
import os
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import safetensors.torch
import torch
from cli_cases import copy_tree, refused, train_run, unchanged, write_reviews
from tiny_models import save_tiny_bert

WEIGHTS = "model.safetensors"
Damage = Callable[[Path], None]


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A tiny model folder, a data set, lines to predict and a run trained on the model."""
    root = tmp_path_factory.mktemp("model-damage")
    model = Path(save_tiny_bert(str(root / "tiny-bert")))
    data = write_reviews(root / "reviews.csv")
    (root / "lines.txt").write_text("a great film\n")
    run = train_run(str(model), data, root / "run")
    return {"root": root, "model": model, "data": data, "run": run}


def weights(change: Callable[[bytes], bytes]) -> Damage:
    """A damage rewriting the weights file's bytes."""
    return lambda folder: (folder / WEIGHTS).write_bytes(change((folder / WEIGHTS).read_bytes()))


def header(change: Callable[[dict[str, Any]], None]) -> Damage:
    """A damage editing the weights file's header and keeping its data: a header that lies."""

    def damage(folder: Path) -> None:
        data = (folder / WEIGHTS).read_bytes()
        size = int.from_bytes(data[:8], "little")
        found = json.loads(data[8 : 8 + size])
        change(found)
        text = json.dumps(found).encode()
        (folder / WEIGHTS).write_bytes(len(text).to_bytes(8, "little") + text + data[8 + size :])

    return damage


def first_tensor(found: dict[str, Any]) -> dict[str, Any]:
    return found[min(k for k in found if k != "__metadata__")]


def last_tensor(found: dict[str, Any]) -> dict[str, Any]:
    tensors = [v for k, v in found.items() if k != "__metadata__"]
    return max(tensors, key=lambda t: t["data_offsets"][1])


def text(name: str, content: str | bytes) -> Damage:
    """A damage replacing file `name` of the folder."""
    data = content.encode() if isinstance(content, str) else content
    return lambda folder: (folder / name).write_bytes(data)


def a_folder_instead(folder: Path) -> None:
    (folder / WEIGHTS).unlink()
    (folder / WEIGHTS / "part").mkdir(parents=True)


def tensors(change: Callable[[dict[str, torch.Tensor]], None]) -> Damage:
    """A damage rewriting the weights as a whole, valid safetensors file."""

    def damage(folder: Path) -> None:
        found = safetensors.torch.load_file(str(folder / WEIGHTS))
        change(found)
        safetensors.torch.save_file(found, str(folder / WEIGHTS))

    return damage


def query_resized(found: dict[str, torch.Tensor]) -> None:
    name = next(n for n in sorted(found) if n.endswith("query.weight"))
    found[name] = torch.zeros(3, 3)


def one_nan(found: dict[str, torch.Tensor]) -> None:
    name = next(n for n in sorted(found) if n.endswith("value.weight"))
    found[name] = found[name].clone()
    found[name][0, 0] = float("nan")


DEEP_LISTS = "[" * 100_000 + "]" * 100_000
DEEP_OBJECTS = '{"a":' * 100_000 + "1" + "}" * 100_000

DAMAGES: dict[str, tuple[Damage, tuple[str, ...]]] = {
    "truncated": (weights(lambda b: b[: len(b) // 2]), (WEIGHTS, "not a whole safetensors file")),
    "truncated-header": (weights(lambda b: b[:100]), (WEIGHTS, "not a whole safetensors file")),
    "garbage": (
        weights(lambda b: random.Random(0).randbytes(5000)),
        (WEIGHTS, "not a whole safetensors file"),
    ),
    "zero-bytes": (weights(lambda b: b""), (WEIGHTS, "is empty")),
    "header-lies-about-a-shape": (
        header(lambda h: first_tensor(h)["shape"].__setitem__(0, first_tensor(h)["shape"][0] + 1)),
        (WEIGHTS, "not a whole safetensors file"),
    ),
    "header-lies-about-the-size": (
        header(lambda h: last_tensor(h)["data_offsets"].__setitem__(1, 10**9)),
        (WEIGHTS, "not a whole safetensors file"),
    ),
    "header-lies-about-a-dtype": (
        header(lambda h: first_tensor(h).__setitem__("dtype", "F16")),
        (WEIGHTS, "not a whole safetensors file"),
    ),
    "a-folder-instead": (a_folder_instead, (WEIGHTS, "is a folder, not a file")),
    "config-not-json": (text("config.json", "{not json"), ("config.json", "is not valid JSON")),
    "config-not-utf8": (text("config.json", b"\xff\xfe{}"), ("config.json", "is not valid JSON")),
    "config-nested-lists": (
        text("config.json", DEEP_LISTS),
        ("config.json", "nested 100,000 levels deep"),
    ),
    "config-nested-objects": (
        text("config.json", DEEP_OBJECTS),
        ("config.json", "nested 100,000 levels deep"),
    ),
    "config-a-list": (text("config.json", "[1, 2]"), ("config.json", "not an object")),
    "config-impossible": (
        text("config.json", json.dumps({"model_type": "bert", "hidden_size": "wide"})),
        ("transformers cannot build it from its files", "hidden_size"),
    ),
    "tokenizer-nested": (
        text("tokenizer.json", DEEP_LISTS),
        ("tokenizer.json", "nested 100,000 levels deep"),
    ),
    "tokenizer-config-not-json": (
        text("tokenizer_config.json", "garbage"),
        ("tokenizer_config.json", "is not valid JSON"),
    ),
    "weights-not-fitting-config": (
        tensors(query_resized),
        ("do not fit its config.json", "query.weight", "(3, 3) in the weights, (32, 32)"),
    ),
    "nan-weights": (tensors(one_nan), ("weights are damaged", "value.weight", "holds NaN")),
}


def damaged(setup: dict[str, Path], work: Path, damage: Damage) -> Path:
    """A damaged copy of the model folder in `work`."""
    folder = copy_tree(setup["model"], work / "model")
    damage(folder)
    return folder


def command(name: str, setup: dict[str, Path], model: Path, work: Path) -> list[str]:
    """The arguments of command `name` run on base model folder `model`."""
    data, run, m = str(setup["data"]), str(setup["run"]), str(model)
    (work / "peft").mkdir(exist_ok=True)
    return {
        "train": ["train", "--model", m, "--data", data, "--out", str(work / "out"),
                  "--no-progress"],
        "eval": ["eval", "--adapter", run, "--data", data, "--model", m],
        "predict": ["predict", "--adapter", run, "--input", str(setup["root"] / "lines.txt"),
                    "--model", m],
        "rank": ["rank", "--models", m, "--data", data, "--sample", "20", "--no-progress"],
        "methods": ["methods", "--model", m],
        "import": ["import", "--format", "peft", "--model", m, "--labels", "fresh,rotten",
                   str(work / "peft"), str(work / "out")],
        "neurons": ["neurons", "find", "--model", m, "--facts", "builtin:countries",
                    "--relation", "capital", "--out", str(work / "out")],
        "analyze": ["analyze", "rsa", "--adapter", run, "--data", data, "--model", m,
                    "--out", str(work / "out"), "--no-progress"],
        "serve": ["serve", "--model", m, "--adapters", str(work / "peft")],
    }[name]  # fmt: skip


def check_refused(
    setup: dict[str, Path], args: list[str], work: Path, capsys: Any, *needles: str
) -> str:
    """`args` fails in one line holding every needle; nothing under `setup` or `work` changes."""
    with unchanged(setup["root"]), unchanged(work):
        line = refused(args, capsys, *needles)
    assert not (work / "out").exists()
    return line


@pytest.mark.parametrize("name", ["train", "predict"])
@pytest.mark.parametrize("case", list(DAMAGES))
def test_a_damaged_model_folder_is_one_line(
    case: str,
    name: str,
    setup: dict[str, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    damage, needles = DAMAGES[case]
    model = damaged(setup, tmp_path, damage)
    line = check_refused(setup, command(name, setup, model, tmp_path), tmp_path, capsys, *needles)
    assert f"cannot load model '{model}'" in line


@pytest.mark.parametrize(
    "name", ["train", "eval", "predict", "rank", "methods", "import", "neurons", "analyze", "serve"]
)
def test_every_command_reading_a_model_folder_refuses_truncated_weights(
    name: str, setup: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if name == "serve" and importlib.util.find_spec("fastapi") is None:
        pytest.skip("serve needs the serve extra")
    model = damaged(setup, tmp_path, DAMAGES["truncated"][0])
    args = command(name, setup, model, tmp_path)
    check_refused(setup, args, tmp_path, capsys, str(model / WEIGHTS), "replace it")


def test_unreadable_weights_are_one_line(
    setup: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = damaged(setup, tmp_path, lambda folder: (folder / WEIGHTS).chmod(0))
    try:
        if os.access(model / WEIGHTS, os.R_OK):
            pytest.skip("this user reads files whatever their mode (root)")
        args = command("train", setup, model, tmp_path)
        check_refused(setup, args, tmp_path, capsys, str(model / WEIGHTS), "permission denied")
    finally:
        (model / WEIGHTS).chmod(0o644)


def test_a_damaged_builtin_cache_folder_says_how_to_rebuild_it(
    setup: dict[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The multilingual-e5-small folder converted once into the cache, later truncated."""
    monkeypatch.setenv("ADAPTLAB_CACHE", str(tmp_path / "cache"))
    cached = copy_tree(setup["model"], tmp_path / "cache" / "models" / "multilingual-e5-small")
    DAMAGES["truncated"][0](cached)
    with unchanged(tmp_path):
        refused(
            ["methods", "--model", "multilingual-e5-small"],
            capsys,
            "cannot load model 'multilingual-e5-small'",
            str(cached / WEIGHTS),
            f"remove {cached} and adaptlab builds it again",
        )
