"""The `state.json` of a training checkpoint, read as untrusted input.

A checkpoint may come from anywhere (a copy, an edit, a disk that lost its tail), so every
field is read with its type, and then the whole record is checked against the run it claims to
continue: where the training stands (epoch, batches done, steps, the epoch's example order and
losses) must be a place this run passes through, the epochs recorded must be the ones before
it, and the best epoch one of them. A record that fails ends in one line naming the file and
the field, before anything is put in place.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from adaptlab.engine.batches import batch_count
from adaptlab.errors import ConfigError
from adaptlab.finite import non_finite
from adaptlab.records.config import TrainConfig
from adaptlab.records.jsonfields import REQUIRED, JsonObject
from adaptlab.records.result import EpochRecord

STATE = "state.json"
EPOCH: Literal["epoch"] = "epoch"
TENSOR_FILE = re.compile(r"tensors-(\d+)\.safetensors")
"""The tensor file a checkpoint's state names: a plain name in its folder, nothing else."""


def tensor_file(step: int) -> str:
    """The name of the tensor file of the checkpoint saved after step `step`."""
    return f"tensors-{step}.safetensors"


def afresh(folder: Path) -> str:
    """What to do about a checkpoint that cannot be resumed (ends its messages)."""
    return f"remove {folder}, or train with --overwrite and without --resume, to start afresh"


@dataclass
class Position:
    """Where a training stands: `done` steps of epoch `epoch` (whose example order is
    `order`, None before it is drawn), `step` steps in all, the epoch's losses so far."""

    epoch: int = 1
    done: int = 0
    step: int = 0
    order: list[int] | None = None
    losses: list[float] = field(default_factory=list)
    seconds: float = 0.0


@dataclass(frozen=True)
class TrainingPlan:
    """The course of a run's training: `epochs` epochs of `per_epoch` steps over
    `examples` training examples, each scored on the dev `metric`; each batch is trained on
    for `updates` steps in a row (`adaptlab.engine.objective.ReusesBatches`)."""

    examples: int
    per_epoch: int
    epochs: int
    metric: str
    updates: int = 1

    @classmethod
    def of(cls, examples: int, config: TrainConfig, metric: str, updates: int = 1) -> TrainingPlan:
        """The plan of training on `examples` examples with `config`'s batches and epochs,
        `updates` steps on each batch."""
        steps = batch_count(examples, config.batch_size) * updates
        return cls(examples, steps, config.epochs, metric, updates)


@dataclass(frozen=True)
class CheckpointRecord:
    """What `state.json` holds: the run's spec and data file's SHA-256 (None for a built-in or
    hub data set), the saving cadence, the tensor file's name, the position, the epochs scored
    so far with the best one, the fp16 steps skipped, and the optimizer's group settings,
    schedule and loss scale as torch states them."""

    spec: dict[str, Any]
    data_digest: str | None
    every: int | Literal["epoch"]
    tensors: str
    position: Position
    epochs: list[EpochRecord]
    best_epoch: int
    best_score: float
    skipped: int
    optimizer_groups: list[dict[str, Any]]
    scheduler: dict[str, Any]
    scaler: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        """The record as `state.json` holds it."""
        return {
            "spec": self.spec,
            "data_digest": self.data_digest,
            "every": self.every,
            "tensors": self.tensors,
            "position": self.position.__dict__,
            "epochs": [e.to_dict() for e in self.epochs],
            "best_epoch": self.best_epoch,
            "best_score": self.best_score,
            "skipped": self.skipped,
            "optimizer_groups": self.optimizer_groups,
            "scheduler": self.scheduler,
            "scaler": self.scaler,
        }

    @classmethod
    def parse(cls, data: Any, folder: Path) -> CheckpointRecord:
        """The record `read_state` found in `folder`, every field of its type; else one line."""
        try:
            return cls._parse(JsonObject(data, str(folder / STATE)))
        except ConfigError as error:
            raise ConfigError(f"{error}; {afresh(folder)}") from None

    @classmethod
    def _parse(cls, record: JsonObject) -> CheckpointRecord:
        """`parse` of the JSON value, errors without the hint."""
        record.refuse_unknown(_FIELDS)
        found = non_finite({k: v for k, v in record.data.items() if k != "best_score"})
        if found is not None:
            raise ConfigError(
                f"{record.where}: {found[0]}: {found[1]} is not a number a run records"
            )
        best_score = record.number("best_score")
        if math.isnan(best_score) or best_score == math.inf:
            raise ConfigError(f"{record.where}: best_score: {best_score} is not a score")
        tensors = record.text("tensors")
        if not TENSOR_FILE.fullmatch(tensors):
            raise ConfigError(f"{record.where}: tensors: {tensors!r} is not a tensor file's name")
        return cls(
            spec=dict(record.mapping("spec")),
            data_digest=record.optional_text("data_digest", REQUIRED),
            every=_every(record),
            tensors=tensors,
            position=_position(record.object("position")),
            epochs=[EpochRecord.from_json(row) for row in record.objects("epochs")],
            best_epoch=record.integer("best_epoch"),
            best_score=best_score,
            skipped=record.integer("skipped"),
            optimizer_groups=[dict(group.data) for group in record.objects("optimizer_groups")],
            scheduler=dict(record.mapping("scheduler")),
            scaler=dict(record.mapping("scaler")),
        )

    def check_fits(self, plan: TrainingPlan, folder: Path) -> None:
        """Fail unless the record is a place `plan`'s training passes through: one line naming
        the field, ending in what to do."""
        at, per_epoch = self.position, plan.per_epoch

        def refuse(name: str, problem: str) -> ConfigError:
            return ConfigError(f"{folder / STATE}: {name}: {problem}; {afresh(folder)}")

        if not 1 <= at.epoch <= plan.epochs + 1:
            raise refuse(
                "position.epoch", f"{at.epoch} is no epoch of this {plan.epochs}-epoch run"
            )
        last = at.epoch > plan.epochs
        if not 0 <= at.done < (1 if last else per_epoch):
            raise refuse(
                "position.done", f"{at.done} batches done, of an epoch of {per_epoch} batches"
            )
        if at.done % plan.updates:
            raise refuse(
                "position.done",
                f"{at.done} steps done, between the {plan.updates} steps taken on one batch",
            )
        if at.step != (at.epoch - 1) * per_epoch + at.done:
            raise refuse(
                "position.step",
                f"{at.step} is not batch {at.done} of epoch {at.epoch} ({per_epoch} an epoch)",
            )
        if at.order is not None and sorted(at.order) != list(range(plan.examples)):
            raise refuse(
                "position.order", f"not an order of this run's {plan.examples} training examples"
            )
        if at.order is None and at.done:
            raise refuse("position.order", f"missing, with {at.done} batches of the epoch done")
        if len(at.losses) != at.done:
            raise refuse("position.losses", f"{len(at.losses)} losses for {at.done} batches")
        if len(self.epochs) != at.epoch - 1:
            raise refuse("epochs", f"{len(self.epochs)} recorded before epoch {at.epoch}")
        for number, epoch in enumerate(self.epochs, start=1):
            if (epoch.epoch, epoch.step) != (number, number * per_epoch):
                raise refuse(
                    f"epochs[{number - 1}]",
                    f"epoch {epoch.epoch} ending at step {epoch.step}, not epoch {number} at "
                    f"step {number * per_epoch}",
                )
            if plan.metric not in epoch.dev_metrics:
                raise refuse(f"epochs[{number - 1}].dev_metrics", f"no {plan.metric} score")
        if self.epochs and not 1 <= self.best_epoch <= len(self.epochs):
            raise refuse("best_epoch", f"{self.best_epoch} is none of the epochs recorded")
        if self.epochs and not math.isfinite(self.best_score):
            raise refuse("best_score", f"{self.best_score} is not the score of an epoch")
        if not self.epochs and (self.best_epoch, self.best_score) != (0, -math.inf):
            raise refuse("best_epoch", f"{self.best_epoch}, before any epoch has ended")
        if not 0 <= self.skipped <= at.step:
            raise refuse("skipped", f"{self.skipped} of {at.step} steps")
        if self.tensors != tensor_file(at.step):
            raise refuse("tensors", f"{self.tensors} is not the file of step {at.step}")


def read_state(folder: Path) -> Any:
    """The JSON value in `folder`'s `state.json` (a regular file), or one line."""
    path = folder / STATE
    if path.is_symlink() or not path.is_file():
        raise ConfigError(f"{path} is not a file adaptlab wrote; {afresh(folder)}")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise ConfigError(f"cannot read {path} ({error}); {afresh(folder)}") from None


_FIELDS = (
    "spec", "data_digest", "every", "tensors", "position", "epochs", "best_epoch", "best_score",
    "skipped", "optimizer_groups", "scheduler", "scaler",
)  # fmt: skip


def _every(record: JsonObject) -> int | Literal["epoch"]:
    """The cadence the checkpoint was saved at, as `--checkpoint-every` takes it."""
    value = record.data.get("every")
    if value == EPOCH or (isinstance(value, int) and not isinstance(value, bool) and value > 0):
        return value  # type: ignore[no-any-return]
    raise ConfigError(
        f"{record.where}: every: expected 'epoch' or a positive number of steps, got {value!r}"
    )


def _position(position: JsonObject) -> Position:
    """The record's position, each field of its type."""
    names = ("epoch", "done", "step", "order", "losses", "seconds")
    position.refuse_unknown(names)
    for name in names:
        if name not in position:
            raise ConfigError(f"{position.where}: position.{name}: missing")
    order = position.data["order"]
    if order is not None and not _all(order, int):
        raise ConfigError(
            f"{position.where}: position.order: expected null or a list of example numbers"
        )
    losses = position.data["losses"]
    if not _all(losses, float):
        raise ConfigError(f"{position.where}: position.losses: expected a list of numbers")
    seconds = position.number("seconds")
    if seconds < 0:
        raise ConfigError(f"{position.where}: position.seconds: {seconds} is below 0")
    return Position(
        epoch=position.integer("epoch"),
        done=position.integer("done"),
        step=position.integer("step"),
        order=None if order is None else list(order),
        losses=[float(loss) for loss in losses],
        seconds=seconds,
    )


def _all(values: object, kind: type[int] | type[float]) -> bool:
    """Whether `values` is a JSON list of integers (`int`) or of numbers (`float`)."""
    if not isinstance(values, list):
        return False
    allowed = int if kind is int else (int, float)
    return all(isinstance(v, allowed) and not isinstance(v, bool) for v in values)
