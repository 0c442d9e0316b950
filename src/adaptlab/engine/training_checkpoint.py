"""Checkpoints of a training in progress, so a killed run resumes and ends as if never stopped.

A checkpoint is a folder beside the run (`<run>.checkpoint/`): `tensors-<step>.safetensors` holds
the trained tensors, the best epoch's, the optimizer's moments and the random generators' states;
`state.json` holds the rest (where in which epoch, the epoch's example order, the schedule, the
loss scale, the epochs so far, the run's spec and its data file's SHA-256 to check a resume
against). No pickle: a user may get a checkpoint from someone else. `state.json` is replaced
last, in one rename, and names its tensor file, so a kill while writing leaves the previous
checkpoint whole.

The folder is adaptlab's alone: a path there that is a file, a link, or a folder holding
anything but a checkpoint's files is refused before the run starts, and only a checkpoint's own
files are ever deleted. A checkpoint is untrusted input: it is resumed only by the run that
wrote it, on the same data, and only once every field and tensor has been checked against that
run (`adaptlab.engine.checkpoint_record`, `adaptlab.engine.checkpoint_parts`).
"""

from __future__ import annotations

import json
import logging
import os
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

import torch
from safetensors.torch import save_file
from torch import nn

from adaptlab.data.identity import content_digest
from adaptlab.engine.checkpoint_parts import (
    Resumable,
    Settings,
    check_settings,
    put_settings,
    put_tensors,
    read_tensors,
    saved_settings,
    saved_tensors,
)
from adaptlab.engine.checkpoint_record import (
    EPOCH,
    STATE,
    TENSOR_FILE,
    CheckpointRecord,
    Position,
    TrainingPlan,
    afresh,
    read_state,
    tensor_file,
)
from adaptlab.engine.precision import Precision, keep_trained_in_float32
from adaptlab.errors import ConfigError
from adaptlab.fileio import atomic_write
from adaptlab.paths import check_writable, listed
from adaptlab.records.config import TrainConfig
from adaptlab.records.result import EpochRecord

__all__ = [
    "CHECKPOINT_SUFFIX",
    "STATE",
    "LoopState",
    "Position",
    "Resumable",
    "TrainingCheckpoint",
    "TrainingPlan",
    "checkpoint_folder",
    "parse_every",
    "training_checkpoint",
]

log = logging.getLogger("adaptlab.train")

CHECKPOINT_SUFFIX = ".checkpoint"
_PARTIAL = re.compile(rf"\.(tensors-\d+\.safetensors\.partial|{re.escape(STATE)}\..+)")
"""Files a save killed half-way leaves: the tensor file before its rename, `atomic_write`'s."""


def checkpoint_folder(run: Path) -> Path:
    """Where the checkpoints of the run written to `run` live."""
    return run.with_name(run.name + CHECKPOINT_SUFFIX)


def parse_every(value: str) -> int | Literal["epoch"]:
    """`--checkpoint-every`: "epoch" (at each epoch's end) or a number of steps."""
    if value == EPOCH:
        return EPOCH
    if value.isascii() and value.isdigit() and int(value) > 0:
        return int(value)
    raise ConfigError(
        f"--checkpoint-every must be 'epoch' or a positive number of steps, got {value!r}"
    )


def training_checkpoint(
    out: Path | None,
    identity: dict[str, Any],
    data: str,
    every: int | Literal["epoch"] | None,
    resume: bool,
    overwrite: bool,
) -> TrainingCheckpoint | None:
    """The checkpoint of the run `identity` on the data source `data`, written to `out`: saved
    every `every` (None: no checkpoints unless resuming, which keeps the saved cadence), or
    None. An earlier run's checkpoint is resumed only when asked, and replaced only with
    `overwrite` (once the new run saves, or when it ends)."""
    if out is None:
        if every is not None or resume:
            raise ConfigError(
                "--checkpoint-every and --resume need --out: checkpoints live beside it"
            )
        return None
    folder = checkpoint_folder(out)
    held = folder.is_dir() and not folder.is_symlink() and (folder / STATE).exists()
    if every is None and not resume and not held:
        return None  # nothing of adaptlab's there, and nothing to write
    _check_folder(folder)
    digest = content_digest(data)
    if resume:
        if not held:
            raise ConfigError(f"--resume: no checkpoint at {folder}; train without --resume")
        record = _record_of(folder, identity, data, digest)
        return TrainingCheckpoint(folder, every or record.every, identity, digest, record)
    if held and not overwrite:
        raise ConfigError(
            f"{folder} holds the checkpoint of an unfinished run: add --resume to go on from it, "
            "or --overwrite to start afresh"
        )
    if folder.exists() and not overwrite:
        raise ConfigError(
            f"{folder} exists and holds no checkpoint (a first save cut short, or an empty "
            "folder); remove it, or add --overwrite to replace it"
        )
    return TrainingCheckpoint(folder, every, identity, digest)


def _record_of(
    folder: Path, identity: dict[str, Any], data: str, digest: str | None
) -> CheckpointRecord:
    """The record of the checkpoint in `folder`, which must be of the run `identity` on the
    data source `data` as it is now (SHA-256 `digest`)."""
    state = read_state(folder)
    if isinstance(state, dict) and state.get("spec") != identity:
        raise ConfigError(
            f"the checkpoint {folder} is of another run (its spec differs); train with the "
            "same options, or --overwrite without --resume to start afresh"
        )
    record = CheckpointRecord.parse(state, folder)
    if record.data_digest != digest:
        raise ConfigError(
            f"{data} changed since the checkpoint {folder} was saved (its SHA-256 differs "
            "from the one recorded); resume on the data it was trained on, or "
            "--overwrite without --resume to start afresh"
        )
    return record


def _check_folder(folder: Path) -> None:
    """Fail unless `folder` is absent or a writable folder holding only a checkpoint's files
    (regular files of their names, no links)."""
    if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
        raise ConfigError(
            f"{folder} is {_kind(folder)}, not a checkpoint folder; move it away (adaptlab "
            "writes and deletes checkpoints there), or give another --out"
        )
    check_writable(folder, "the checkpoint folder")
    entries = sorted(folder.iterdir()) if folder.is_dir() else []
    for entry in entries:
        if _named_ours(entry) and not _is_ours(entry):
            raise ConfigError(
                f"{entry} is {_kind(entry)}, not a file adaptlab wrote; {afresh(folder)}"
            )
    foreign = [entry.name for entry in entries if not _named_ours(entry)]
    if foreign:
        raise ConfigError(
            f"the checkpoint folder {folder} holds {listed(foreign)}, which are no checkpoint's "
            "files; move them away (adaptlab writes and deletes checkpoints there)"
        )


def _kind(path: Path) -> str:
    """What `path` is, for a message: a link (to where), a folder or a file."""
    if path.is_symlink():
        return f"a symbolic link (to {os.readlink(path)})"
    return "a folder" if path.is_dir() else "a file" if path.is_file() else "no regular file"


def _named_ours(entry: Path) -> bool:
    """Whether `entry` has the name of a file a checkpoint is made of."""
    name = entry.name
    return name == STATE or bool(TENSOR_FILE.fullmatch(name) or _PARTIAL.fullmatch(name))


def _is_ours(entry: Path) -> bool:
    """Whether `entry` of a checkpoint folder is a file a checkpoint is made of."""
    return _named_ours(entry) and entry.is_file() and not entry.is_symlink()


@dataclass
class LoopState:
    """Everything the loop needs to go on: the position, the epochs scored so far and the best
    one, the optimiser, schedule, loss scale and random generators."""

    position: Position
    epochs: list[EpochRecord]
    best_epoch: int
    best_score: float
    best: dict[str, torch.Tensor] | None
    skipped: int


class TrainingCheckpoint:
    """Saves the loop's state every `every` steps (or at each epoch's end; never when None)
    into `folder`, with the spec `identity` and data digest of its run, and gives a resumed
    run the `record` it goes on from."""

    def __init__(
        self,
        folder: Path,
        every: int | Literal["epoch"] | None,
        identity: dict[str, Any],
        digest: str | None,
        record: CheckpointRecord | None = None,
    ) -> None:
        self.folder, self.every, self.identity, self.digest = folder, every, identity, digest
        self.record = record
        self._checked: tuple[Settings, dict[str, torch.Tensor]] | None = None

    def due(self, step: int, epoch_ended: bool) -> bool:
        """Whether to save now, after step `step` (at an epoch's end when `epoch_ended`)."""
        if isinstance(self.every, int):
            return step % self.every == 0
        return epoch_ended and self.every == EPOCH

    def save(self, parts: Resumable, state: LoopState) -> None:
        """Write the checkpoint. The tensors go to a new file named by the step, then
        `state.json`, which names it, replaces the old one in one rename: a kill at any moment
        leaves a whole checkpoint (the new one or the one before)."""
        assert self.every is not None
        name = tensor_file(state.position.step)
        settings = saved_settings(parts)
        record = CheckpointRecord(
            spec=self.identity,
            data_digest=self.digest,
            every=self.every,
            tensors=name,
            position=state.position,
            epochs=state.epochs,
            best_epoch=state.best_epoch,
            best_score=state.best_score,
            skipped=state.skipped,
            optimizer_groups=settings.optimizer_groups,
            scheduler=settings.scheduler,
            scaler=settings.scaler,
        )
        self.folder.mkdir(parents=True, exist_ok=True)
        partial = self.folder / f".{name}.partial"
        save_file(saved_tensors(parts, state.best), str(partial))
        partial.replace(self.folder / name)
        atomic_write(self.folder / STATE, json.dumps(record.to_dict(), indent=1).encode())
        for older in self.folder.iterdir():
            if TENSOR_FILE.fullmatch(older.name) and older.name != name:
                older.unlink()

    def check_run(
        self,
        model: nn.Module,
        plan: TrainingPlan,
        config: TrainConfig,
        learning_rate: float,
        precision: str,
    ) -> None:
        """Check the checkpoint being resumed against the run training `model` over `plan`
        with `config` at `precision`, as the loop will (`load`), before the run says
        anything. A cadence that would save between the steps taken on one batch (whose batch
        a resumed run could not make again) is refused too."""
        if isinstance(self.every, int) and self.every % plan.updates:
            raise ConfigError(
                f"--checkpoint-every {self.every} would save between the {plan.updates} steps "
                f"taken on one batch; give a multiple of {plan.updates}"
            )
        if self.record is None:
            return
        trainable = keep_trained_in_float32(model)
        device = trainable[0][1].device if trainable else torch.device("cpu")
        scaler = Precision(precision, device).scaler
        parts = Resumable.build(trainable, config, learning_rate, plan, scaler, config.seed)
        self._checked = self._check(parts, plan)

    def load(self, parts: Resumable, plan: TrainingPlan) -> LoopState:
        """Check the checkpoint against the run (`plan`, `parts`) unless `check_run` did, and
        put its state in place; return the loop's position and records. Nothing is put in
        place unless all of it fits: else one line naming the file and the field or tensor."""
        record = self.record
        assert record is not None, "load only a checkpoint being resumed"
        settings, tensors = self._checked or self._check(parts, plan)
        self._checked = None
        put_settings(parts, settings)
        best = put_tensors(parts, tensors)
        return LoopState(
            position=replace(record.position),
            epochs=list(record.epochs),
            best_epoch=record.best_epoch,
            best_score=record.best_score,
            best=best or None,
            skipped=record.skipped,
        )

    def _check(
        self, parts: Resumable, plan: TrainingPlan
    ) -> tuple[Settings, dict[str, torch.Tensor]]:
        """The record's settings and tensors, each checked against the run."""
        record = self.record
        assert record is not None
        record.check_fits(plan, self.folder)
        settings = check_settings(parts, record, self.folder)
        return settings, read_tensors(self.folder / record.tensors, parts, record)

    def exists(self) -> bool:
        """Whether the run goes on from a checkpoint."""
        return self.record is not None

    def remove(self) -> None:
        """Delete the checkpoint's files once the run is published, and its folder when that
        holds nothing else (files put there since are kept, and said so)."""
        if not self.folder.is_dir() or self.folder.is_symlink():
            return
        for entry in self.folder.iterdir():
            if _is_ours(entry):
                entry.unlink()
        if any(self.folder.iterdir()):
            log.info("kept %s: it holds files that are not the checkpoint's", self.folder)
        else:
            self.folder.rmdir()
