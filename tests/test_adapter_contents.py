"""What an adapter folder holds is checked, not only its checksums: a folder edited and its
checksums recomputed (as whoever edits one would) is refused in one line naming the file and
the tensor or field, through every command that loads one, and nothing on disk changes."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import safetensors.torch
import torch
from cli_cases import copy_tree, refused, run_cli, train_run, unchanged, write_reviews
from tiny_models import save_tiny_bert

from adaptlab.records.config import TrainConfig
from adaptlab.runs.run import RunSpec, execute

Tensors = dict[str, torch.Tensor]
TensorEdit = Callable[[Tensors], Tensors]
ManifestEdit = Callable[[dict[str, Any]], None]


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A tiny model folder, a data set, lines to predict, a trained run and a run stacked on it."""
    root = tmp_path_factory.mktemp("contents")
    model = Path(save_tiny_bert(str(root / "tiny-bert")))
    data = write_reviews(root / "reviews.csv")
    (root / "lines.txt").write_text("a great film\na dull film\n")
    run = train_run(str(model), data, root / "run")
    train = TrainConfig(epochs=1, batch_size=16, learning_rate=1e-3, seed=0)
    spec = RunSpec.build(str(model), str(data), "pfeiffer", train=train, stack=(str(run),))
    execute(spec, root / "stacked", progress=False)
    return {"root": root, "model": model, "data": data, "run": run, "stacked": root / "stacked"}


def rewrite(folder: Path, tensors: TensorEdit | None, manifest: ManifestEdit | None) -> str:
    """Edit an adapter folder's tensors and manifest, then recompute the checksum and size the
    manifest keeps of the tensor file, as whoever edits a folder would; the new checksum."""
    path, manifest_path = folder / "adapter.safetensors", folder / "manifest.json"
    data = json.loads(manifest_path.read_text())
    if tensors is not None:
        path.write_bytes(safetensors.torch.save(tensors(safetensors.torch.load_file(str(path)))))
    data["tensors"]["sha256"] = hashlib.sha256(path.read_bytes()).hexdigest()
    data["tensors"]["bytes"] = path.stat().st_size
    if manifest is not None:
        manifest(data)
    manifest_path.write_text(json.dumps(data))
    return str(data["tensors"]["sha256"])


def tampered(
    run: Path, target: Path, tensors: TensorEdit | None = None, manifest: ManifestEdit | None = None
) -> Path:
    """A copy of run folder `run` at `target` whose adapter was edited (`rewrite`)."""
    copy_tree(run, target)
    rewrite(target / "adapter", tensors, manifest)
    return target


def each(change: Callable[[torch.Tensor], torch.Tensor]) -> TensorEdit:
    """A tensor edit changing every tensor."""
    return lambda tensors: {name: change(t) for name, t in tensors.items()}


def first(change: Callable[[torch.Tensor], torch.Tensor]) -> TensorEdit:
    """A tensor edit changing the first tensor (by name) only."""
    return lambda tensors: {n: change(t) if n == min(tensors) else t for n, t in tensors.items()}


def one_value(value: float) -> Callable[[torch.Tensor], torch.Tensor]:
    """A change setting one element of a tensor to `value`."""

    def change(tensor: torch.Tensor) -> torch.Tensor:
        changed = tensor.clone()
        changed.view(-1)[0] = value
        return changed

    return change


def predict(setup: dict[str, Path], run: Path) -> list[str]:
    return [
        "predict", "--adapter", str(run), "--input", str(setup["root"] / "lines.txt"),
        "--model", str(setup["model"]),
    ]  # fmt: skip


def evaluate(setup: dict[str, Path], run: Path) -> list[str]:
    return [
        "eval", "--adapter", str(run), "--data", str(setup["data"]), "--model", str(setup["model"])
    ]  # fmt: skip


def check_refused(
    setup: dict[str, Path], args: list[str], capsys: pytest.CaptureFixture[str], *needles: str
) -> str:
    """`args` fails in one line holding every needle; the model, data and runs stay as they were."""
    with unchanged(setup["root"]):
        return refused(args, capsys, *needles)


def drop_one(tensors: Tensors) -> Tensors:
    return {name: t for name, t in tensors.items() if name != min(tensors)}


def reshape_one(tensors: Tensors) -> Tensors:
    name = next(n for n in sorted(tensors) if n.endswith("bias") and tensors[n].numel() % 2 == 0)
    return {n: t.reshape(2, -1) if n == name else t for n, t in tensors.items()}


TENSOR_CASES = {
    "nan": (each(lambda t: torch.full_like(t, float("nan"))), ("holds NaN",)),
    "one-nan": (first(one_value(float("nan"))), ("holds NaN",)),
    "infinity": (first(one_value(float("inf"))), ("holds an infinite value",)),
    "1e38": (
        each(lambda t: torch.full_like(t, 1e38)),
        ("size 1e+38", "trained weights stay under 1,000,000"),
    ),
    "past-the-bound": (
        first(one_value(2e6)),
        ("size 2e+06", "trained weights stay under 1,000,000"),
    ),
    "float64": (each(lambda t: t.double()), ("is float64", "float32, float16, bfloat16")),
    "int64": (each(lambda t: t.long()), ("is int64",)),
    "int8": (first(lambda t: t.to(torch.int8)), ("is int8",)),
    "bool": (first(lambda t: t > 0), ("is bool",)),
    "fewer-tensors": (drop_one, ("lists 21 tensors (tensors.count), the file holds 20",)),
}


@pytest.mark.parametrize("case", list(TENSOR_CASES))
def test_tensors_a_trained_adapter_never_holds_are_refused(
    case: str, setup: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    edit, needles = TENSOR_CASES[case]
    run = tampered(setup["run"], setup["root"] / f"t-{case}", tensors=edit)
    line = check_refused(setup, predict(setup, run), capsys, *needles)
    assert f"{run / 'adapter' / 'adapter.safetensors'}: tensor '" in line or "tensors.count" in line
    assert "get" in line  # says what to do


def test_values_just_inside_the_bound_load(
    setup: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    run = tampered(setup["run"], setup["root"] / "t-inside", tensors=first(one_value(9e5)))
    code, out, err = run_cli(predict(setup, run), capsys)
    assert code == 0 and len(out.splitlines()) == 2, err


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_tensors_stay_loadable(
    dtype: torch.dtype, setup: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """float16 / bfloat16 are what a half-precision model's adapter holds: they load and predict
    the labels the float32 adapter predicts."""
    code, expected, _ = run_cli(predict(setup, setup["run"]), capsys)
    run = tampered(setup["run"], setup["root"] / f"t-{dtype}", tensors=each(lambda t: t.to(dtype)))
    code, out, err = run_cli(predict(setup, run), capsys)
    assert code == 0, err
    labels = [line.split("\t")[0] for line in out.splitlines()]
    assert labels == [line.split("\t")[0] for line in expected.splitlines()]


def set_field(*path: str, value: Any) -> ManifestEdit:
    """A manifest edit setting the field at `path` to `value`."""

    def edit(manifest: dict[str, Any]) -> None:
        parent = manifest
        for key in path[:-1]:
            parent = parent[key]
        parent[path[-1]] = value

    return edit


def add_to(*path: str, by: int) -> ManifestEdit:
    def edit(manifest: dict[str, Any]) -> None:
        manifest[path[0]][path[1]] += by

    return edit


MANIFEST_CASES = {
    "count": (add_to("tensors", "count", by=1), ("lists 22 tensors (tensors.count)",)),
    "parameters": (add_to("tensors", "parameters", by=1), ("(tensors.parameters)",)),
    "bytes": (add_to("tensors", "bytes", by=1), ("(tensors.bytes)",)),
    "more-labels": (
        set_field("label_names", value=["fresh", "rotten", "meh"]),
        ("tensor 'classifier.bias' has shape (2,)", "its label_names disagree"),
    ),
    "fewer-labels": (
        lambda m: m.update(task="multi_label", label_names=["fresh"]),
        ("tensor 'classifier.bias' has shape (2,)", "its label_names disagree"),
    ),
    "no-labels": (set_field("label_names", value=[]), ("label_names must be a non-empty list",)),
    "null-labels": (
        set_field("label_names", value=None),
        ("label_names must be the names of a single_label adapter's labels",),
    ),
    "head-not-trained": (
        set_field("train_head", value=False),
        ("holds head tensor", "train_head false"),
    ),
    "unknown-field": (set_field("comment", value="hi"), ("unknown field 'comment'",)),
    "unknown-base-field": (
        set_field("base_model", "revision", value="main"),
        ("unknown field 'base_model.revision'",),
    ),
    "unknown-tensors-field": (
        set_field("tensors", "dtype", value="F32"),
        ("unknown field 'tensors.dtype'",),
    ),
    "fuses-of-an-adapter": (set_field("fuses", value=["run"]), ("unknown field 'fuses'",)),
    "unknown-method-field": (
        lambda m: m["methods"][0].update(note="x"),
        ("methods must be a list of {name, config}",),
    ),
    "unknown-method-option": (
        set_field("methods", value=[{"name": "bitfit", "config": {"rank": 4}}]),
        ("unknown option 'rank'",),
    ),
    "version-not-text": (set_field("library_version", value=7), ("library_version must be",)),
}


@pytest.mark.parametrize("case", list(MANIFEST_CASES))
def test_manifests_that_disagree_with_their_folder_are_refused(
    case: str, setup: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    edit, needles = MANIFEST_CASES[case]
    run = tampered(setup["run"], setup["root"] / f"m-{case}", manifest=edit)
    line = check_refused(setup, predict(setup, run), capsys, *needles)
    assert str(run / "adapter") in line


def test_a_reshaped_tensor_is_refused(
    setup: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    run = tampered(setup["run"], setup["root"] / "t-reshaped", tensors=reshape_one)
    check_refused(setup, predict(setup, run), capsys, "has shape (2, ", "in this model")


def test_a_deeply_nested_manifest_is_one_line(
    setup: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    run = tampered(setup["run"], setup["root"] / "m-nested")
    path = run / "adapter" / "manifest.json"
    text = path.read_text().rstrip().removesuffix("}")
    for brackets in ("[]", '{"a":}'):
        opening, closing = brackets[:-1], brackets[-1]
        path.write_text(f'{text}, "deep": {opening * 100_000}1{closing * 100_000}}}')
        check_refused(setup, predict(setup, run), capsys, "manifest.json", "nested 100,001 levels")


def test_eval_refuses_an_edited_folder_too(
    setup: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    run = tampered(setup["run"], setup["root"] / "e-nan", tensors=first(one_value(float("nan"))))
    check_refused(setup, evaluate(setup, run), capsys, "adapter.safetensors", "holds NaN")


def test_train_stack_refuses_an_edited_folder_before_training(
    setup: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    run = tampered(setup["run"], setup["root"] / "s-f64", tensors=each(lambda t: t.double()))
    out = setup["root"] / "s-out"
    args = [
        "train", "--model", str(setup["model"]), "--data", str(setup["data"]), "--epochs", "1",
        "--stack", str(run), "--out", str(out), "--no-progress",
    ]  # fmt: skip
    check_refused(setup, args, capsys, "adapter.safetensors", "is float64")
    assert not out.exists()


def test_train_fusion_refuses_an_edited_folder_before_training(
    setup: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    run = tampered(setup["run"], setup["root"] / "f-count", tensors=drop_one)
    out = setup["root"] / "f-out"
    args = [
        "train", "--model", str(setup["model"]), "--data", str(setup["data"]), "--epochs", "1",
        "--method", "fusion", "--adapters", f"{setup['run']},{run}", "--out", str(out),
        "--no-progress",
    ]  # fmt: skip
    check_refused(setup, args, capsys, "tensors.count")
    assert not out.exists()


def test_an_edited_member_of_a_stacked_folder_is_refused(
    setup: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """The member's checksums and the folder above's record of it recomputed: its content still
    gives it away."""
    run = copy_tree(setup["stacked"], setup["root"] / "stacked-nan")
    top = run / "adapter"
    (member,) = (top / "adapters").iterdir()
    checksum = rewrite(member, each(lambda t: torch.full_like(t, float("nan"))), None)
    rewrite(top, None, lambda m: m["members"].update({member.name: checksum}))
    check_refused(
        setup, predict(setup, run), capsys, str(member / "adapter.safetensors"), "holds NaN"
    )
