"""A training checkpoint is untrusted input: a `<out>.checkpoint` path that is not adaptlab's is
left alone, and a damaged or edited checkpoint (of a run, or of a sequence's stages) ends in one
line naming the file and the field, with nothing on disk changed."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from cli_cases import refused, run_cli, unchanged, write_reviews
from safetensors.torch import load_file, save_file
from study_helpers import one_thread
from test_continual_sequence import sequence, write_stage
from tiny_models import save_tiny_bert

import adaptlab.engine.loop as loop
from adaptlab.cli.app import main
from adaptlab.continual import SequenceSpec, run_sequence
from adaptlab.continual.checkpoint import (
    PROGRESS_FILE,
    SINGLE_FILE,
    STATE_FILE,
    STRATEGY_FILE,
)
from adaptlab.engine.training_checkpoint import STATE, TrainingCheckpoint, checkpoint_folder
from adaptlab.errors import AdaptlabError, ConfigError

STOP = 11  # steps: the checkpoint of step 10 stays (epoch 2 of 3, 8 batches an epoch)


def train_args(model: Path, *extra: str, data: str = "d.csv") -> list[str]:
    return [
        "train", "--model", str(model), "--data", data, "--method", "houlsby",
        "--epochs", "3", "--batch-size", "4", "--learning-rate", "1e-3", "--device", "cpu",
        "--out", "run", "--no-progress", *extra,
    ]  # fmt: skip


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A tiny model, and a folder holding `d.csv` and `run.checkpoint/` of a run stopped
    after step STOP."""
    root = tmp_path_factory.mktemp("hostile-checkpoints")
    model = Path(save_tiny_bert(str(root / "tiny-bert")))
    base = root / "base"
    write_reviews(base / "d.csv", rows=40)
    told = loop.tell_step

    def stop_after(title: str, step: int, loss: float, rate: float) -> None:
        told(title, step, loss, rate)
        if step == STOP:
            raise AdaptlabError("stopped")

    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(base)
        patch.setattr(loop, "tell_step", stop_after)
        with pytest.raises(SystemExit):
            main(train_args(model, "--checkpoint-every", "2"))
    assert json.loads((base / "run.checkpoint" / STATE).read_text())["position"]["step"] == 10
    return {"model": model, "base": base}


@pytest.fixture
def folder(made: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh copy of the stopped run's folder, the working directory."""
    copy = tmp_path / "copy"
    shutil.copytree(made["base"], copy, symlinks=True)
    monkeypatch.chdir(copy)
    return copy


def _state(folder: Path) -> dict[str, Any]:
    return json.loads((checkpoint_folder(folder / "run") / STATE).read_text())


def _edit(change: Callable[[dict[str, Any]], object]) -> Callable[[Path], None]:
    def edit(folder: Path) -> None:
        state = _state(folder)
        change(state)
        (checkpoint_folder(folder / "run") / STATE).write_text(json.dumps(state))

    return edit


def _tensor_file(folder: Path) -> Path:
    return checkpoint_folder(folder / "run") / _state(folder)["tensors"]


def _tensors(change: Callable[[dict[str, torch.Tensor]], object]) -> Callable[[Path], None]:
    def edit(folder: Path) -> None:
        path = _tensor_file(folder)
        tensors = load_file(str(path))
        change(tensors)
        save_file(tensors, str(path))

    return edit


def _first(tensors: dict[str, torch.Tensor], prefix: str, suffix: str = "") -> str:
    return next(n for n in sorted(tensors) if n.startswith(prefix) and n.endswith(suffix))


def _position(key: str, value: object) -> Callable[[Path], None]:
    return _edit(lambda state: state["position"].__setitem__(key, value))


def _order(change: Callable[[list[int]], object]) -> Callable[[Path], None]:
    return _edit(lambda state: change(state["position"]["order"]))


def _swap_labels(folder: Path) -> None:
    text = (folder / "d.csv").read_text()
    swapped = text.replace("fresh", "@").replace("rotten", "fresh").replace("@", "rotten")
    (folder / "d.csv").write_text(swapped)


def _link_tensors(folder: Path) -> None:
    path = _tensor_file(folder)
    path.unlink()
    path.symlink_to("/etc/passwd")


def _replace_state(text: str) -> Callable[[Path], None]:
    return lambda folder: (checkpoint_folder(folder / "run") / STATE).write_text(text)


# name: (damage, the needles of the one line)
DAMAGED: dict[str, tuple[Callable[[Path], None], tuple[str, ...]]] = {
    "data changed (labels swapped)": (_swap_labels, ("d.csv changed since the checkpoint",)),
    "tensor file a link to /etc/passwd": (_link_tensors, ("is a symbolic link (to /etc/passwd)",)),
    "tensor file truncated": (
        lambda f: _tensor_file(f).write_bytes(_tensor_file(f).read_bytes()[:1000]),
        ("tensors-10.safetensors: cannot be read",),
    ),
    "tensor file missing": (lambda f: _tensor_file(f).unlink(), ("tensors-10.safetensors",)),
    "tensor file a folder": (
        lambda f: (_tensor_file(f).unlink(), _tensor_file(f).mkdir()),
        ("tensors-10.safetensors is a folder",),
    ),
    "state.json not JSON": (_replace_state("{not json"), ("cannot read", STATE)),
    "state.json a list": (_replace_state("[1, 2]"), ("expected a JSON object",)),
    "state.json a folder": (
        lambda f: (
            (checkpoint_folder(f / "run") / STATE).unlink(),
            (checkpoint_folder(f / "run") / STATE).mkdir(),
        ),
        ("state.json is a folder",),
    ),
    "order past the data": (_order(lambda o: o.__setitem__(0, 10**6)), ("position.order",)),
    "order of the wrong length": (_order(lambda o: o.pop()), ("position.order",)),
    "order with duplicates": (_order(lambda o: o.__setitem__(1, o[0])), ("position.order",)),
    "order of strings": (_order(lambda o: o.__setitem__(0, "x")), ("position.order",)),
    "done a million": (_position("done", 10**6), ("position.done: 1000000",)),
    "done negative": (_position("done", -3), ("position.done: -3",)),
    "done a string": (_position("done", "2"), ("position.done: expected an integer",)),
    "epoch 999": (_position("epoch", 999), ("position.epoch: 999",)),
    "epoch 0": (_position("epoch", 0), ("position.epoch: 0",)),
    "step 999999": (_position("step", 999999), ("position.step: 999999",)),
    "losses of the wrong length": (_position("losses", [0.5] * 5), ("position.losses: 5 losses",)),
    "losses not finite": (_position("losses", [float("nan")] * 2), ("position.losses[0]: nan",)),
    "seconds negative": (_position("seconds", -5.0), ("position.seconds",)),
    "position missing a key": (
        _edit(lambda s: s["position"].pop("order")),
        ("position.order: missing",),
    ),
    "position with an extra key": (_position("extra", 1), ("position.extra: unknown field",)),
    "best score NaN, best epoch 77": (
        _edit(lambda s: s.update(best_score=float("nan"), best_epoch=77)),
        ("best_score: nan",),
    ),
    "best epoch 77": (_edit(lambda s: s.update(best_epoch=77)), ("best_epoch: 77",)),
    "epochs recorded too many": (_edit(lambda s: s.update(epochs=s["epochs"] * 3)), ("epochs:",)),
    "epoch record edited": (_edit(lambda s: s["epochs"][0].update(step=999)), ("epochs[0]",)),
    "epoch record without its score": (
        _edit(lambda s: s["epochs"][0].update(dev_metrics={})),
        ("epochs[0].dev_metrics: no accuracy score",),
    ),
    "skipped negative": (_edit(lambda s: s.update(skipped=-4)), ("skipped: -4",)),
    "every zero": (_edit(lambda s: s.update(every=0)), ("every:",)),
    "missing field": (_edit(lambda s: s.pop("scaler")), ("scaler: missing",)),
    "unknown field": (_edit(lambda s: s.update(extra=1)), ("extra: unknown field",)),
    "scheduler at step 10^9": (
        _edit(lambda s: s["scheduler"].update(last_epoch=10**9, _step_count=10**9 + 1)),
        ("scheduler.last_epoch: 1000000000",),
    ),
    "scheduler a list": (_edit(lambda s: s.update(scheduler=[1])), ("scheduler:",)),
    "learning rate edited": (
        _edit(lambda s: s["optimizer_groups"][0].update(lr=10.0)),
        ("optimizer_groups[0].lr: 10.0",),
    ),
    "optimizer group names an unknown tensor": (
        _edit(lambda s: s["optimizer_groups"][0]["params"].__setitem__(0, "nope")),
        ("optimizer_groups[0].params[0]: 'nope'",),
    ),
    "tensor file of another step": (
        _edit(lambda s: s.update(tensors="tensors-4.safetensors")),
        ("tensors: tensors-4.safetensors",),
    ),
    "extra tensor": (
        _tensors(lambda t: t.update({"trained.evil": torch.zeros(3)})),
        ("trained.evil is no tensor this run trains",),
    ),
    "missing tensor": (_tensors(lambda t: t.pop(_first(t, "trained."))), ("is missing",)),
    "missing optimizer moment": (
        _tensors(lambda t: t.pop(_first(t, "optimizer.", ".exp_avg"))),
        ("exp_avg is missing",),
    ),
    "tensor of the wrong shape": (
        _tensors(lambda t: t.update({_first(t, "trained."): torch.zeros(7)})),
        ("of shape [7]",),
    ),
    "tensor of the wrong dtype": (
        _tensors(lambda t: t.update({_first(t, "best."): t[_first(t, "best.")].half()})),
        ("torch.float16",),
    ),
    "tensor not finite": (
        _tensors(lambda t: t[_first(t, "trained.")].fill_(float("inf"))),
        ("holds values that are not finite",),
    ),
    "negative mean of squares": (
        _tensors(lambda t: t[_first(t, "optimizer.", ".exp_avg_sq")].fill_(-1.0)),
        ("exp_avg_sq: holds negative values",),
    ),
    "optimizer step count past the run": (
        _tensors(lambda t: t[_first(t, "optimizer.", ".step")].fill_(1e9)),
        ("1000000000.0 steps",),
    ),
    "random state damaged": (
        _tensors(lambda t: t["random.torch"].zero_()),
        ("random.torch: not a random generator's state",),
    ),
    "random state short": (
        _tensors(lambda t: t.update({"random.order": t["random.order"][:100]})),
        ("random.order",),
    ),
}


@pytest.mark.parametrize("case", sorted(DAMAGED))
def test_a_damaged_checkpoint_is_refused_in_one_line_and_left_as_it_was(
    case: str, made: dict[str, Path], folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    damage, needles = DAMAGED[case]
    damage(folder)
    with unchanged(folder):
        refused(train_args(made["model"], "--resume"), capsys, *needles)


def _user_folder(folder: Path) -> None:
    shutil.rmtree(folder / "run.checkpoint")
    (folder / "run.checkpoint").mkdir()
    (folder / "run.checkpoint" / "notes.txt").write_text("the user's")


def _user_file(folder: Path) -> None:
    shutil.rmtree(folder / "run.checkpoint")
    (folder / "run.checkpoint").write_text("the user's")


def _user_link(folder: Path) -> None:
    shutil.rmtree(folder / "run.checkpoint")
    (folder / "mine").mkdir()
    (folder / "run.checkpoint").symlink_to(folder / "mine")


def _empty(folder: Path) -> None:
    shutil.rmtree(folder / "run.checkpoint")
    (folder / "run.checkpoint").mkdir()


# name: (what is at run.checkpoint, the extra options, the needles of the one line)
NOT_OURS: dict[str, tuple[Callable[[Path], None], tuple[str, ...], tuple[str, ...]]] = {
    "a user's folder": (_user_folder, (), ("holds notes.txt, which are no checkpoint's files",)),
    "a user's folder, --overwrite": (_user_folder, ("--overwrite",), ("holds notes.txt",)),
    "a user's file": (_user_file, (), ("run.checkpoint is a file, not a checkpoint folder",)),
    "a user's file, --overwrite": (_user_file, ("--overwrite",), ("is a file",)),
    "a link": (_user_link, (), ("run.checkpoint is a symbolic link",)),
    "an empty folder": (_empty, (), ("exists and holds no checkpoint",)),
    "a checkpoint with a user's file": (
        lambda f: (f / "run.checkpoint" / "notes.txt").write_text("the user's"),
        ("--overwrite",),
        ("holds notes.txt",),
    ),
}


@pytest.mark.parametrize("case", sorted(NOT_OURS))
def test_a_checkpoint_path_that_is_not_adaptlabs_is_left_alone(
    case: str, made: dict[str, Path], folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    put, extra, needles = NOT_OURS[case]
    put(folder)
    with unchanged(folder):
        refused(train_args(made["model"], "--checkpoint-every", "2", *extra), capsys, *needles)


def test_resume_refuses_a_checkpoint_holding_a_users_file(
    made: dict[str, Path], folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (folder / "run.checkpoint" / "notes.txt").write_text("the user's")
    with unchanged(folder):
        refused(train_args(made["model"], "--resume"), capsys, "holds notes.txt")


def test_overwrite_keeps_the_old_checkpoint_until_the_new_run_ends(
    made: dict[str, Path], folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with unchanged(folder):  # a run that fails early leaves the old checkpoint as it was
        refused(train_args(made["model"], "--overwrite", data="none.csv"), capsys, "none.csv")
    code, _, err = run_cli(train_args(made["model"], "--overwrite", "--epochs", "1"), capsys)
    assert code == 0, err
    assert not (folder / "run.checkpoint").exists() and (folder / "run" / "metrics.json").exists()


@pytest.fixture(scope="module")
def stopped_sequence(tmp_path_factory: pytest.TempPathFactory) -> tuple[SequenceSpec, Path]:
    """An EWC sequence of two stages, stopped after the first: its spec and checkpoint."""
    root = tmp_path_factory.mktemp("hostile-sequence")
    model = save_tiny_bert(str(root / "tiny-bert"))
    spec = sequence(model, (write_stage(root, "sentiment"), write_stage(root, "topic")), "ewc")

    def stop(index: int, outcome: object) -> None:
        raise AdaptlabError("stopped")

    with one_thread(), pytest.raises(AdaptlabError, match="stopped"):
        run_sequence(spec, progress=False, checkpoint=root / "saved", on_stage=stop)
    return spec, root / "saved"


def _stage_file(name: str, change: Callable[[Path], object]) -> Callable[[Path], None]:
    def edit(folder: Path) -> None:
        change(folder / "stage-0" / name)

    return edit


def _progress(change: Callable[[dict[str, Any]], object]) -> Callable[[Path], None]:
    def edit(folder: Path) -> None:
        path = folder / "stage-0" / PROGRESS_FILE
        progress = json.loads(path.read_text())
        change(progress)
        path.write_text(json.dumps(progress))

    return edit


def _stage_tensors(
    name: str, change: Callable[[dict[str, torch.Tensor]], object]
) -> Callable[[Path], None]:
    def edit(folder: Path) -> None:
        path = folder / "stage-0" / name
        tensors = load_file(str(path))
        change(tensors)
        save_file(tensors, str(path))

    return edit


def _relink(path: Path) -> None:
    path.unlink()
    path.symlink_to("/etc/passwd")


SEQUENCE_DAMAGED: dict[str, tuple[Callable[[Path], None], str]] = {
    "progress a link": (_stage_file(PROGRESS_FILE, _relink), "progress.json is not a file"),
    "more stages than its folder": (
        _progress(lambda p: p.update(stages=p["stages"] * 2)),
        "stages: 2 finished stages in stage-0",
    ),
    "trained not a list": (_progress(lambda p: p.update(trained=5)), "trained: expected a list"),
    "unknown field": (_progress(lambda p: p.update(extra=1)), "extra: unknown field"),
    "state a link": (_stage_file(STATE_FILE, _relink), "state.safetensors is not a file"),
    "state truncated": (
        _stage_file(STATE_FILE, lambda p: p.write_bytes(p.read_bytes()[:1000])),
        "cannot read",
    ),
    "state not finite": (
        _stage_tensors(STATE_FILE, lambda t: t[min(t)].fill_(float("nan"))),
        "holds values that are not finite",
    ),
    "state of another dtype": (
        _stage_tensors(STATE_FILE, lambda t: t.update({min(t): t[min(t)].half()})),
        "torch.float16",
    ),
    "state missing a tensor": (_stage_tensors(STATE_FILE, lambda t: t.pop(min(t))), "missing"),
    "strategy truncated": (
        _stage_file(STRATEGY_FILE, lambda p: p.write_bytes(p.read_bytes()[:500])),
        "cannot read",
    ),
    "ewc state missing a part": (
        _stage_tensors(STRATEGY_FILE, lambda t: t.pop(min(k for k in t if k.endswith("/centre")))),
        "is no quadratic of it",
    ),
    "ewc importance negative": (
        _stage_tensors(
            STRATEGY_FILE, lambda t: t[min(k for k in t if k.endswith("/importance"))].fill_(-1)
        ),
        "is no quadratic of it",
    ),
    "single scores not numbers": (
        lambda f: (f / SINGLE_FILE).write_text('{"scores": ["x"]}'),
        "scores: expected a list of finite numbers",
    ),
    "single scores too many": (
        lambda f: (f / SINGLE_FILE).write_text('{"scores": [0.5, 0.5]}'),
        "2 single-stage scores for the 1 stages",
    ),
}


@pytest.mark.parametrize("case", sorted(SEQUENCE_DAMAGED))
def test_a_damaged_sequence_checkpoint_is_refused_in_one_line(
    case: str, stopped_sequence: tuple[SequenceSpec, Path], tmp_path: Path
) -> None:
    spec, saved = stopped_sequence
    folder = tmp_path / "saved"
    shutil.copytree(saved, folder, symlinks=True)
    damage, needle = SEQUENCE_DAMAGED[case]
    damage(folder)
    with unchanged(folder), one_thread(), pytest.raises(ConfigError) as refusal:
        run_sequence(spec, progress=False, checkpoint=folder)
    assert needle in str(refusal.value) and "\n" not in str(refusal.value)


def test_a_finished_run_deletes_only_its_checkpoints_files(tmp_path: Path) -> None:
    folder = tmp_path / "run.checkpoint"
    folder.mkdir()
    for name in (STATE, "tensors-4.safetensors", ".tensors-6.safetensors.partial"):
        (folder / name).write_text("the checkpoint's")
    (folder / "notes.txt").write_text("put there while the run trained")
    TrainingCheckpoint(folder, 2, {}, None).remove()
    assert [p.name for p in folder.iterdir()] == ["notes.txt"]
    (folder / "notes.txt").unlink()
    (folder / STATE).write_text("the checkpoint's")
    TrainingCheckpoint(folder, 2, {}, None).remove()
    assert not folder.exists()
