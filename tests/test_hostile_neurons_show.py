"""Files from others that named things adaptlab then trusted: a neurons.json naming a model
folder elsewhere is not followed on its own (as an adapter manifest's is not), and `adapters
show` counts parameters and bytes from the tensor file, saying where the manifest lists others.
Each refusal is one `error:` line, exit 1, every input unchanged byte for byte."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cli_cases import refused, run_cli, unchanged
from test_knowledge_cli import FACTS
from tiny_models import tiny_model

import adaptlab
from adaptlab.methods.manifest import MANIFEST, TENSORS
from adaptlab.models.resolve import names_local_model

COMMANDS = ("suppress", "amplify", "edit", "erase")


def fact(subject: str, answer: str) -> dict[str, Any]:
    return {
        "fact": {"subject": subject, "relation": "capital", "object": answer},
        "neurons": [[0, 1]],
        "scores": [0.5],
        "share": 1.0,
        "probability": 0.5,
        "baseline_neurons": [],
    }


def neuron_file(folder: Path, model: str) -> Path:
    """A neurons.json as `find` writes it in `folder`, naming `model`, and its facts file."""
    folder.mkdir(parents=True, exist_ok=True)
    facts = folder.parent / "facts.json"
    facts.write_text(json.dumps(FACTS))
    data = {
        "model": model,
        "kind": "masked",
        "facts": str(facts),
        "relation": "capital",
        "results": [fact("France", "Paris"), fact("Peru", "Lima")],
    }
    path = folder / "neurons.json"
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("where", ["absolute", "relative", "home"])
def test_a_model_folder_the_neuron_file_names_is_not_followed(
    command: str,
    where: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    elsewhere = tmp_path / "elsewhere" / "model"
    elsewhere.mkdir(parents=True)
    (elsewhere / "config.json").write_text("{}")
    monkeypatch.chdir(tmp_path / "elsewhere")
    named = {"absolute": str(elsewhere), "relative": "./model", "home": "~/models/x"}[where]
    path = neuron_file(tmp_path / "kn", named)
    with unchanged(tmp_path):
        refused(
            ["neurons", command, "--neurons", str(path)], capsys,
            f"{path}: names the local model {named!r}", f"pass --model {named}",
            "a neuron file's paths are not followed on their own",
        )  # fmt: skip


def test_which_names_a_file_may_make_adaptlab_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Built-in and hub names are loaded from a file's word; anything on this machine is not."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bert").mkdir()
    assert not names_local_model("minilm-l6")
    assert not names_local_model("sentence-transformers/all-MiniLM-L6-v2")
    for local in ("bert", "./bert", "/models/bert", "~/bert", "a/b/c", "..", "C:\\models"):
        assert names_local_model(local), local


# --- adapters show ------------------------------------------------------------------------


@pytest.fixture
def adapter(tmp_path: Path) -> Path:
    """A saved LoRA adapter folder of a tiny classifier."""
    model = tiny_model("bert")
    adaptlab.adapt(model, "lora")
    return adaptlab.save_adapter(model, tmp_path / "adapter", task="single_label")


def edit_manifest(folder: Path, **tensors: int) -> dict[str, Any]:
    """Set fields of the manifest's `tensors`; the manifest as it was."""
    manifest = json.loads((folder / MANIFEST).read_text())
    edited = json.loads(json.dumps(manifest))
    edited["tensors"].update(tensors)
    (folder / MANIFEST).write_text(json.dumps(edited))
    return manifest


def test_show_counts_from_the_tensor_file_and_says_where_the_manifest_differs(
    adapter: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    truth = edit_manifest(adapter, parameters=7, bytes=9)["tensors"]
    with unchanged(adapter):
        code, out, err = run_cli(["adapters", "show", str(adapter), "--json"], capsys)
        assert code == 0, err
        row = json.loads(out)[0]
        assert (row["parameters"], row["bytes"]) == (truth["parameters"], truth["bytes"])
        assert (row["manifest_parameters"], row["manifest_bytes"]) == (7, 9)
        code, out, err = run_cli(["adapters", "show", str(adapter)], capsys)
    assert code == 0, err
    assert f"{truth['parameters']:,} (manifest: 7)" in out and "(manifest: 9)" in out
    assert "the manifest lists 7 parameters and 9 bytes" in out and "edited" in out


def test_show_of_a_folder_whose_counts_agree_says_nothing_more(
    adapter: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_cli(["adapters", "show", str(adapter)], capsys)
    assert code == 0, err
    assert "manifest" not in out


def test_show_of_a_folder_without_a_readable_tensor_file_is_one_line(
    adapter: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tensors = adapter / TENSORS
    data = tensors.read_bytes()
    tensors.write_bytes(data[: len(data) // 2])
    with unchanged(adapter):
        refused(["adapters", "show", str(adapter)], capsys, "cannot be read as safetensors")
    tensors.unlink()
    with unchanged(adapter):
        refused(["adapters", "show", str(adapter)], capsys, f"{tensors}: missing")
