"""Checkpoints of a training in progress, so a killed run resumes and ends as if never stopped.

A checkpoint is a folder beside the run (`<run>.checkpoint/`): `tensors-<step>.safetensors` holds
the trained tensors, the best epoch's, the optimizer's moments and the random generators' states;
`state.json` holds the rest (where in which epoch, the epoch's example order, the schedule, the
loss scale, the epochs so far, the run's spec to check a resume against). No pickle: a user may
get a checkpoint from someone else. `state.json` is replaced last, in one rename, and names its
tensor file, so a kill while writing leaves the previous checkpoint whole.
"""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import torch
from safetensors.torch import load_file, save_file
from torch import nn

from adaptlab.errors import ConfigError
from adaptlab.fileio import atomic_write
from adaptlab.train.result import EpochRecord

STATE = "state.json"
CHECKPOINT_SUFFIX = ".checkpoint"
EPOCH: Literal["epoch"] = "epoch"


def checkpoint_folder(run: Path) -> Path:
    """Where the checkpoints of the run written to `run` live."""
    return run.with_name(run.name + CHECKPOINT_SUFFIX)


def parse_every(value: str) -> int | Literal["epoch"]:
    """`--checkpoint-every`: "epoch" (at each epoch's end) or a number of steps."""
    if value == EPOCH:
        return EPOCH
    if value.isdigit() and int(value) > 0:
        return int(value)
    raise ConfigError(
        f"--checkpoint-every must be 'epoch' or a positive number of steps, got {value!r}"
    )


def training_checkpoint(
    out: Path | None,
    identity: dict[str, Any],
    every: int | Literal["epoch"] | None,
    resume: bool,
    overwrite: bool,
) -> TrainingCheckpoint | None:
    """The checkpoint of the run `identity` written to `out`: saved every `every` (None: no
    checkpoints unless resuming, which keeps the saved cadence), or None. An earlier run's
    checkpoint is resumed only when asked, and replaced only with `overwrite`."""
    if out is None:
        if every is not None or resume:
            raise ConfigError(
                "--checkpoint-every and --resume need --out: checkpoints live beside it"
            )
        return None
    folder = checkpoint_folder(out)
    held = (folder / STATE).is_file()
    if resume:
        if not held:
            raise ConfigError(f"--resume: no checkpoint at {folder}; train without --resume")
        saved = _read_state(folder)
        if saved.get("spec") != identity:
            raise ConfigError(
                f"the checkpoint {folder} is of another run (its spec differs); train with the "
                "same options, or --overwrite without --resume to start afresh"
            )
        every = _checked_every(saved.get("every"), folder) if every is None else every
    elif held and not overwrite:
        raise ConfigError(
            f"{folder} holds the checkpoint of an unfinished run: add --resume to go on from it, "
            "or --overwrite to start afresh"
        )
    elif held:
        _remove_ours(folder)
    if every is None:
        return None
    return TrainingCheckpoint(folder, every, identity)


@dataclass
class Position:
    """Where a training stands: `done` batches of epoch `epoch` (whose example order is
    `order`, None before it is drawn), `step` steps in all, the epoch's losses so far."""

    epoch: int = 1
    done: int = 0
    step: int = 0
    order: list[int] | None = None
    losses: list[float] = field(default_factory=list)
    seconds: float = 0.0


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


@dataclass
class Resumable:
    """What a checkpoint saves and puts back besides the loop's records: the trained tensors,
    the optimizer, the schedule, the fp16 loss scale and the example order's generator."""

    trainable: list[tuple[str, nn.Parameter]]
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LRScheduler
    scaler: torch.amp.GradScaler
    generator: torch.Generator


class TrainingCheckpoint:
    """Saves the loop's state every `every` steps (or at each epoch's end) into `folder`, with
    the spec `identity` of its run, and gives it back to a resumed run."""

    def __init__(
        self, folder: Path, every: int | Literal["epoch"], identity: dict[str, Any]
    ) -> None:
        self.folder, self.every, self.identity = folder, every, identity

    def due(self, step: int, epoch_ended: bool) -> bool:
        """Whether to save now, after step `step` (at an epoch's end when `epoch_ended`)."""
        if isinstance(self.every, int):
            return step % self.every == 0
        return epoch_ended

    def save(self, parts: Resumable, state: LoopState) -> None:
        """Write the checkpoint. The tensors go to a new file named by the step, then
        `state.json`, which names it, replaces the old one in one rename: a kill at any moment
        leaves a whole checkpoint (the new one or the one before)."""
        trainable = parts.trainable
        tensors = {f"trained.{n}": p.detach().cpu().contiguous() for n, p in trainable}
        if state.best is not None:
            tensors |= {f"best.{n}": t.cpu().contiguous() for n, t in state.best.items()}
        moments, groups = _optimizer_parts(parts.optimizer, trainable)
        tensors |= moments
        tensors["random.order"] = parts.generator.get_state()
        tensors["random.torch"] = torch.get_rng_state()
        if torch.cuda.is_available():
            tensors["random.cuda"] = torch.cuda.get_rng_state()
        name = f"tensors-{state.position.step}.safetensors"
        record = {
            "spec": self.identity,
            "every": self.every,
            "tensors": name,
            "position": state.position.__dict__,
            "epochs": [e.to_dict() for e in state.epochs],
            "best_epoch": state.best_epoch,
            "best_score": state.best_score,
            "skipped": state.skipped,
            "optimizer_groups": groups,
            "scheduler": parts.scheduler.state_dict(),
            "scaler": parts.scaler.state_dict(),
        }
        self.folder.mkdir(parents=True, exist_ok=True)
        partial = self.folder / f".{name}.partial"
        save_file(tensors, str(partial))
        partial.replace(self.folder / name)
        atomic_write(self.folder / STATE, json.dumps(record, indent=1).encode())
        for older in self.folder.glob("tensors-*.safetensors"):
            if older.name != name:
                older.unlink()

    def load(self, parts: Resumable) -> LoopState:
        """Put the saved state in place; return the loop's position and records."""
        record = _read_state(self.folder)
        if not _OURS.fullmatch(str(record.get("tensors"))) or record.keys() < _KEYS:
            raise ConfigError(f"{self.folder / STATE} is not a checkpoint adaptlab wrote")
        try:
            return self._put_back(parts, record)
        except (KeyError, TypeError, ValueError, RuntimeError, OSError) as error:
            raise ConfigError(
                f"the checkpoint {self.folder} does not fit this run ({type(error).__name__}: "
                f"{str(error).splitlines()[0] if str(error) else ''}); remove it to start afresh"
            ) from None

    def _put_back(self, parts: Resumable, record: dict[str, Any]) -> LoopState:
        """`load` once the record is known to be one adaptlab wrote."""
        tensors = load_file(str(self.folder / record["tensors"]))
        trainable = parts.trainable
        with torch.no_grad():
            for name, parameter in trainable:
                parameter.copy_(tensors[f"trained.{name}"])
        _load_optimizer(parts.optimizer, trainable, tensors, record["optimizer_groups"])
        parts.scheduler.load_state_dict(record["scheduler"])
        parts.scaler.load_state_dict(record["scaler"])
        parts.generator.set_state(tensors["random.order"])
        torch.set_rng_state(tensors["random.torch"])
        if "random.cuda" in tensors and torch.cuda.is_available():
            torch.cuda.set_rng_state(tensors["random.cuda"])
        device = trainable[0][1].device if trainable else torch.device("cpu")
        best = {n: tensors[f"best.{n}"].to(device) for n, _ in trainable if f"best.{n}" in tensors}
        return LoopState(
            position=Position(**record["position"]),
            epochs=[EpochRecord(**e) for e in record["epochs"]],
            best_epoch=record["best_epoch"],
            best_score=record["best_score"],
            best=best or None,
            skipped=record["skipped"],
        )

    def exists(self) -> bool:
        """Whether a checkpoint is there to resume."""
        return (self.folder / STATE).is_file()

    def remove(self) -> None:
        """Delete the checkpoint once the run is published."""
        shutil.rmtree(self.folder, ignore_errors=True)


_OURS = re.compile(r"tensors-\d+\.safetensors")
"""The tensor file a checkpoint's state names: a plain name in its folder, nothing else."""
_KEYS = {
    "spec", "every", "tensors", "position", "epochs", "best_epoch", "best_score", "skipped",
    "optimizer_groups", "scheduler", "scaler",
}  # fmt: skip


def _read_state(folder: Path) -> dict[str, Any]:
    """The checkpoint's `state.json` as a JSON object, or one line saying it is damaged."""
    path = folder / STATE
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        raise ConfigError(
            f"cannot read {path} ({error}); remove {folder} to start afresh"
        ) from None
    if not isinstance(record, dict):
        raise ConfigError(f"{path} is not a checkpoint adaptlab wrote; remove {folder}")
    return record


def _checked_every(value: Any, folder: Path) -> int | Literal["epoch"]:
    """The cadence a checkpoint was saved at, as `--checkpoint-every` takes it."""
    if value == EPOCH or (isinstance(value, int) and not isinstance(value, bool) and value > 0):
        return value  # type: ignore[no-any-return]
    raise ConfigError(f"{folder / STATE}: every must be 'epoch' or a positive number of steps")


def _remove_ours(folder: Path) -> None:
    """Delete a checkpoint folder that holds nothing adaptlab did not write there."""
    others = [
        entry.name
        for entry in folder.iterdir()
        if entry.name != STATE
        and not _OURS.fullmatch(entry.name)
        and not entry.name.startswith((".tensors-", f".{STATE}."))  # unfinished writes
    ]
    if others:
        raise ConfigError(
            f"{folder} holds {', '.join(sorted(others))} besides a checkpoint; move them away "
            "or remove it yourself"
        )
    shutil.rmtree(folder)


def _optimizer_parts(
    optimizer: torch.optim.Optimizer, trainable: list[tuple[str, nn.Parameter]]
) -> tuple[dict[str, torch.Tensor], list[dict[str, Any]]]:
    """The optimizer's per-tensor state as named tensors, and its groups' settings (JSON)."""
    names = {id(p): n for n, p in trainable}
    tensors: dict[str, torch.Tensor] = {}
    for parameter, state in optimizer.state.items():
        for key, value in state.items():
            value = value if isinstance(value, torch.Tensor) else torch.tensor(value)
            tensors[f"optimizer.{names[id(parameter)]}.{key}"] = value.detach().cpu().contiguous()
    groups = [
        {k: v for k, v in group.items() if k != "params"}
        | {"params": [names[id(p)] for p in group["params"]]}
        for group in optimizer.param_groups
    ]
    return tensors, groups


def _load_optimizer(
    optimizer: torch.optim.Optimizer,
    trainable: list[tuple[str, nn.Parameter]],
    tensors: dict[str, torch.Tensor],
    groups: list[dict[str, Any]],
) -> None:
    """Put the optimizer's moments and group settings back, matched by tensor name."""
    by_name = dict(trainable)
    for group, saved in zip(optimizer.param_groups, groups, strict=True):
        if [id(by_name[n]) for n in saved["params"]] != [id(p) for p in group["params"]]:
            raise ConfigError("the checkpoint's optimizer groups do not match the run's tensors")
        group.update({k: v for k, v in saved.items() if k != "params"})
    prefix = "optimizer."
    for key, value in tensors.items():
        if key.startswith(prefix):
            name, _, entry = key[len(prefix) :].rpartition(".")
            parameter = by_name[name]
            optimizer.state[parameter][entry] = value.to(
                parameter.device if value.ndim else value.device
            )
