"""An adapter folder's manifest is untrusted input: every bad edit is one line, never a traceback,
never a file read from outside the folder, never a huge allocation."""

from __future__ import annotations

import copy
import json
import math
import random
from pathlib import Path
from typing import Any

import pytest
import torch
from tiny_models import tiny_inputs, tiny_model, train_steps

import adaptlab
from adaptlab import Fuse
from adaptlab.engine.restore import load_trained
from adaptlab.errors import AdaptlabError


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any], torch.Tensor]:
    """A fusion folder (two LoRA + pfeiffer members), its manifest and its logits."""
    folder = tmp_path_factory.mktemp("fusion")
    model = tiny_model("bert")
    adaptlab.add_adapter(model, "a", "lora", train_head=False)
    adaptlab.add_adapter(model, "b", "pfeiffer", train_head=False, seed=1)
    adaptlab.add_fusion(model, Fuse("a", "b"))
    adaptlab.train_adapter(model, "fusion")
    train_steps(model)
    with torch.no_grad():
        expected = model(**tiny_inputs()).logits
    adaptlab.save_adapter(model, folder, name="fusion", task="single_label")
    return folder, json.loads((folder / "manifest.json").read_text()), expected


def load_edited(folder: Path, manifest: dict[str, Any], target: str = "manifest.json") -> Any:
    (folder / target).write_text(json.dumps(manifest))
    return adaptlab.load_adapter(tiny_model("bert"), folder)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda m: m["tensors"].update(file="../../runs/base/adapter.safetensors"), "tensors.file"),
        (lambda m: m["tensors"].update(file="/etc/passwd"), "tensors.file"),
        (lambda m: m.pop("base_model"), "base_model is missing"),
        (lambda m: m.update(methods="lora"), "methods must be a non-empty list"),
        (lambda m: m.update(seed=float("nan")), "seed must be an integer"),
        (lambda m: m.update(seed=1e30), "seed must be an integer"),
        (lambda m: m.update(seed=10**30), "seed must be an integer"),
        (lambda m: m["base_model"].update(fingerprint="../x"), "base_model.fingerprint"),
        (lambda m: m.update(members={"../a": m["members"]["a"]}), "members must be"),
        (lambda m: m.update(fuses=["a", "zz"]), "'zz' is used but not among members"),
        (lambda m: m.update(kind="macro"), "kind must be one of adapter, fusion"),
        (lambda m: m["methods"][0]["config"].update(temperature="hot"), "temperature"),
        (lambda m: m.update(label_names=["x", "x"]), "distinct labels"),
        (lambda m: m.update(label_names=["x"]), "label_names has 1 names, the model's head 3"),
        (lambda m: m.update(task=["poetry"]), "task must be a non-empty string"),
        (lambda m: m.update(format_version=True), "format version True"),
    ],
)
def test_bad_manifests_are_one_line(saved, edit, message: str, tmp_path: Path) -> None:
    source, manifest, _ = saved
    folder = copy_folder(source, tmp_path)
    edited = copy.deepcopy(manifest)
    edit(edited)
    with pytest.raises(AdaptlabError, match=message) as error:
        load_edited(folder, edited)
    assert "\n" not in str(error.value)


def test_a_task_no_one_registered_is_refused_in_one_line_where_the_task_is_read(
    saved, tmp_path: Path
) -> None:
    """The methods read a manifest's task as a name (they sit below the tasks); what loads the
    adapter for its task refuses a name no task has, before any model loads."""
    source, manifest, _ = saved
    folder = copy_folder(source, tmp_path)
    (folder / "manifest.json").write_text(json.dumps({**manifest, "task": "poetry"}))
    with pytest.raises(AdaptlabError, match="unknown task 'poetry'") as error:
        load_trained(folder, model="no-model-is-loaded")
    assert "\n" not in str(error.value)


def test_a_member_asking_for_a_huge_lora_is_refused_before_any_allocation(
    saved, tmp_path: Path
) -> None:
    source, _, _ = saved
    folder = copy_folder(source, tmp_path)
    member = json.loads((folder / "adapters" / "a" / "manifest.json").read_text())
    member["methods"][0]["config"]["rank"] = 10**12
    with pytest.raises(AdaptlabError, match="rank 1000000000000 exceeds the full rank"):
        load_edited(folder / "adapters" / "a", member)


def test_random_edits_load_or_fail_in_one_line(saved, tmp_path: Path) -> None:
    """Three hundred seeded random edits of a valid manifest: a correct load or one line."""
    source, manifest, expected = saved
    rng = random.Random(0)
    loaded = refused = 0
    for trial in range(300):
        folder = copy_folder(source, tmp_path / str(trial))
        edited = mutate(copy.deepcopy(manifest), rng)
        try:
            model = load_edited(folder, edited)
        except AdaptlabError as error:
            assert "\n" not in str(error), str(error)
            refused += 1
            continue
        with torch.no_grad():
            assert torch.allclose(model(**tiny_inputs()).logits, expected, atol=1e-5)
        loaded += 1
    assert refused > 200 and loaded > 0


def copy_folder(source: Path, target: Path) -> Path:
    for path in source.rglob("*"):
        if path.is_file():
            dest = target / path.relative_to(source)
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(path.read_bytes())
    return target


ODD_VALUES: list[Any] = [
    None, True, -1, 0, 10**18, 1e308, math.nan, -math.inf, "", "x" * 2000, "../../etc",
    "/abs/path", [], ["a"], {}, {"a": 1}, 3.5,
]  # fmt: skip


def mutate(manifest: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    """Delete, replace or retype one field somewhere in the manifest (nested ones included)."""
    paths = list(_paths(manifest, ()))
    path = rng.choice(paths)
    parent = manifest
    for key in path[:-1]:
        parent = parent[key]
    action = rng.random()
    if action < 0.3 and isinstance(parent, dict):
        del parent[path[-1]]
    else:
        parent[path[-1]] = rng.choice(ODD_VALUES)
    return manifest


def _paths(value: Any, prefix: tuple[Any, ...]) -> Any:
    if isinstance(value, dict):
        for key, item in value.items():
            yield (*prefix, key)
            yield from _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield (*prefix, index)
            yield from _paths(item, (*prefix, index))
