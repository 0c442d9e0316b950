"""A manifest naming a task adaptlab does not know is refused as it is read, in one line naming
the file, the field, the task and the known tasks: a combined adapter's heads and sources as
well as an adapter's own task, from eval, predict, train --stack, combine, serve and the library
alike, with every file left as it was."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cli_cases import refused, unchanged, write_reviews
from test_combine import combined_heads

from adaptlab.engine.restore import load_trained
from adaptlab.errors import AdapterFileError
from adaptlab.serve.registry import scan_registry
from adaptlab.tasks.adapter_manifest import read_adapter_manifest
from adaptlab.tasks.registry import TASKS

Edit = Callable[[dict[str, Any]], None]
KNOWN = f"known tasks: {', '.join(TASKS.listed())}"


@pytest.fixture(scope="module")
def combined(tiny_model_dir: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two LoRA sources with different labels combined: a folder with two heads."""
    folder = tmp_path_factory.mktemp("combined")
    return combined_heads(tiny_model_dir, folder, weights=[0.5, 0.5])


def edited(source: Path, target: Path, edit: Edit) -> Path:
    """A copy of adapter or run folder `source` at `target`, its manifest edited."""
    copy = Path(shutil.copytree(source, target))
    manifest = copy / "adapter" / "manifest.json"
    manifest = manifest if manifest.is_file() else copy / "manifest.json"
    data = json.loads(manifest.read_text())
    edit(data)
    manifest.write_text(json.dumps(data))
    return copy


def poetry_head(manifest: dict[str, Any]) -> None:
    manifest["heads"]["topics"]["task"] = "poetry"


def poetry_source(manifest: dict[str, Any]) -> None:
    manifest["combined"]["sources"][1]["task"] = "poetry"


def poetry(manifest: dict[str, Any]) -> None:
    manifest["task"] = "poetry"


@pytest.mark.parametrize(
    ("edit", "field"),
    [(poetry_head, "heads.topics.task"), (poetry_source, "combined.sources[1].task")],
)
def test_eval_refuses_a_combined_adapter_naming_an_unknown_task(
    combined: Path,
    tiny_model_dir: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    edit: Edit,
    field: str,
) -> None:
    folder = edited(combined, tmp_path / "both", edit)
    data = write_reviews(tmp_path / "reviews.csv")
    args = ["eval", "--adapter", str(folder), "--head", "topics", "--data", str(data)]
    with unchanged(tmp_path):
        line = refused(
            [*args, "--model", tiny_model_dir],
            capsys,
            f"{folder / 'manifest.json'}: {field} names unknown task 'poetry'; {KNOWN}",
        )
    assert line.startswith(f"error: {folder / 'manifest.json'}: ")


def test_the_library_refuses_it_whichever_head_is_chosen(
    combined: Path, tiny_model_dir: str, tmp_path: Path
) -> None:
    folder = edited(combined, tmp_path / "both", poetry_head)
    expected = f"{folder / 'manifest.json'}: heads.topics.task names unknown task 'poetry'"
    with unchanged(folder):
        for read in (
            lambda: read_adapter_manifest(folder),
            lambda: load_trained(folder, model=tiny_model_dir, head="sentiment"),
        ):
            with pytest.raises(AdapterFileError) as error:
                read()
            assert str(error.value) == f"{expected}; {KNOWN}"
    assert read_adapter_manifest(combined).heads is not None  # the intact folder reads


def test_predict_train_stack_and_combine_refuse_an_adapter_of_an_unknown_task(
    trained: Path, tiny_model_dir: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = edited(trained, tmp_path / "run", poetry)
    needle = f"{run / 'adapter' / 'manifest.json'}: task names unknown task 'poetry'; {KNOWN}"
    texts = tmp_path / "texts.txt"
    texts.write_text("a film\n")
    data = write_reviews(tmp_path / "reviews.csv")
    predict = ["predict", "--adapter", str(run), "--input", str(texts)]
    train = ["train", "--data", str(data), "--method", "houlsby", "--stack", str(run)]
    combine = ["combine", "--adapters", f"{trained},{run}", "--out", str(tmp_path / "both")]
    with unchanged(tmp_path):
        refused([*predict, "--model", tiny_model_dir], capsys, needle)
        refused([*train, "--model", tiny_model_dir, "--out", str(tmp_path / "out")], capsys, needle)
        refused([*combine, "--model", tiny_model_dir], capsys, needle)
    assert not (tmp_path / "out").exists() and not (tmp_path / "both").exists()


def test_serve_refuses_the_folder_naming_its_manifest(
    combined: Path, trained: Path, tmp_path: Path
) -> None:
    root = tmp_path / "adapters"
    root.mkdir()
    edited(combined, root / "both", poetry_source)
    edited(trained, root / "run", poetry)
    shutil.copytree(trained, root / "good")
    with unchanged(root):
        registry = scan_registry(root, lambda manifest: None)
    assert set(registry.entries) == {"good"}
    manifest = root / "both" / "manifest.json"
    assert registry.refused["both"].startswith(f"{manifest}: combined.sources[1].task names ")
    assert registry.refused["run"].startswith(f"{root / 'run' / 'adapter' / 'manifest.json'}: ")
