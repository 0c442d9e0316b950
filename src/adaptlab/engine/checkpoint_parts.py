"""What a training checkpoint puts back into torch, checked against the run before any of it is
put in place.

The tensor file must hold exactly the run's trainable tensors (and the best epoch's copy once
an epoch has ended), AdamW's state of them (`adaptlab.engine.optimizer`: all of a tensor's
entries or none, for a tensor no gradient has reached yet) and the random generators' states,
each with the run's name, shape and dtype and finite values. The optimizer's group settings,
the learning-rate schedule and the fp16 loss scale are not taken from the file: they are the
run's own after the record's optimizer steps, and the file must agree with them.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeGuard

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file
from torch import nn

from adaptlab.engine.checkpoint_record import STATE, CheckpointRecord, TrainingPlan, afresh
from adaptlab.engine.optimizer import optimizer_and_schedule
from adaptlab.errors import ConfigError
from adaptlab.records.config import TrainConfig

TRAINED, BEST, OPTIMIZER = "trained.", "best.", "optimizer."
ORDER_RANDOM, TORCH_RANDOM, CUDA_RANDOM = "random.order", "random.torch", "random.cuda"


@dataclass
class Resumable:
    """What a checkpoint saves and puts back besides the loop's records: the trained tensors,
    the optimizer, the schedule, the fp16 loss scale and the example order's generator."""

    trainable: list[tuple[str, nn.Parameter]]
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LambdaLR
    scaler: torch.amp.GradScaler
    generator: torch.Generator

    @classmethod
    def build(
        cls,
        trainable: list[tuple[str, nn.Parameter]],
        config: TrainConfig,
        learning_rate: float,
        plan: TrainingPlan,
        scaler: torch.amp.GradScaler,
        seed: int,
    ) -> Resumable:
        """The loop's optimizer and schedule (`adaptlab.engine.optimizer`) for `trainable` over
        `plan`, with the loss `scaler` and the example order's generator seeded by `seed`."""
        total_steps = plan.per_epoch * plan.epochs
        optimizer, scheduler = optimizer_and_schedule(trainable, config, learning_rate, total_steps)
        return cls(trainable, optimizer, scheduler, scaler, torch.Generator().manual_seed(seed))


@dataclass(frozen=True)
class Settings:
    """The optimizer's group settings, the schedule and the loss scale, as JSON."""

    optimizer_groups: list[dict[str, Any]]
    scheduler: dict[str, Any]
    scaler: dict[str, Any]


def saved_tensors(
    parts: Resumable, best: dict[str, torch.Tensor] | None
) -> dict[str, torch.Tensor]:
    """Every tensor a checkpoint keeps, by its name in the tensor file."""
    names = {id(p): n for n, p in parts.trainable}
    tensors = {f"{TRAINED}{n}": p.detach().cpu().contiguous() for n, p in parts.trainable}
    if best is not None:
        tensors |= {f"{BEST}{n}": t.cpu().contiguous() for n, t in best.items()}
    for parameter, state in parts.optimizer.state.items():
        for key, value in state.items():
            value = value if isinstance(value, torch.Tensor) else torch.tensor(value)
            tensors[f"{OPTIMIZER}{names[id(parameter)]}.{key}"] = value.detach().cpu().contiguous()
    tensors[ORDER_RANDOM] = parts.generator.get_state()
    tensors[TORCH_RANDOM] = torch.get_rng_state()
    if torch.cuda.is_available():
        tensors[CUDA_RANDOM] = torch.cuda.get_rng_state()
    return tensors


def saved_settings(parts: Resumable) -> Settings:
    """The optimizer's group settings, the schedule and the loss scale as they are now."""
    return Settings(
        _groups(parts, [group["lr"] for group in parts.optimizer.param_groups]),
        _as_json(parts.scheduler.state_dict()),
        _as_json(parts.scaler.state_dict()),
    )


def check_settings(parts: Resumable, record: CheckpointRecord, folder: Path) -> Settings:
    """The settings the run has after the record's optimizer steps; the record must hold
    them (else one line naming the field)."""
    steps = record.position.step - record.skipped
    scheduler = parts.scheduler
    rates = [
        float(base) * rate(steps)
        for base, rate in zip(scheduler.base_lrs, scheduler.lr_lambdas, strict=True)
    ]
    expected = Settings(
        _groups(parts, rates),
        _as_json(
            scheduler.state_dict()
            | {"last_epoch": steps, "_step_count": steps + 1, "_last_lr": rates}
        ),
        _scale(parts.scaler, record, folder),
    )
    for name in ("optimizer_groups", "scheduler", "scaler"):
        found = _difference(getattr(record, name), getattr(expected, name), name)
        if found is not None:
            raise ConfigError(
                f"{folder / STATE}: {found} after {steps} optimizer steps; {afresh(folder)}"
            )
    return expected


def put_settings(parts: Resumable, settings: Settings) -> None:
    """Set the optimizer's groups, the schedule and the loss scale to `settings`."""
    for group, saved in zip(parts.optimizer.param_groups, settings.optimizer_groups, strict=True):
        group.update({k: v for k, v in saved.items() if k != "params"})
    parts.scheduler.load_state_dict(settings.scheduler)
    parts.scaler.load_state_dict(settings.scaler)


def read_tensors(path: Path, parts: Resumable, record: CheckpointRecord) -> dict[str, torch.Tensor]:
    """The checkpoint's tensors, checked to be the run's (module doc); else one line naming
    the file and the tensor."""
    folder = path.parent

    def refuse(problem: str) -> ConfigError:
        return ConfigError(f"{path}: {problem}; {afresh(folder)}")

    if path.is_symlink() or not path.is_file():
        raise refuse("not a file adaptlab wrote")
    try:
        tensors = load_file(str(path))
    except (SafetensorError, OSError) as error:
        raise refuse(f"cannot be read ({error})") from None
    kinds = _kinds(parts, has_best=record.best_epoch > 0)
    unknown = sorted(set(tensors) - set(kinds))
    if unknown:
        raise refuse(f"{unknown[0]} is no tensor this run trains or keeps")
    missing = [name for name, kind in kinds.items() if kind.required and name not in tensors]
    for entries in _optimizer_entries(parts).values():  # a tensor's state: whole or absent
        if any(n in tensors for n in entries):
            missing += [n for n in entries if n not in tensors]
    if missing:
        raise refuse(f"{missing[0]} is missing")
    steps = record.position.step - record.skipped
    for name, tensor in tensors.items():
        problem = kinds[name].problem(tensor, steps)
        if problem is not None:
            raise refuse(f"{name}: {problem}")
    return tensors


def put_tensors(parts: Resumable, tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Put the checked tensors in place; return the best epoch's (empty before one)."""
    by_name = dict(parts.trainable)
    with torch.no_grad():
        for name, parameter in parts.trainable:
            parameter.copy_(tensors[f"{TRAINED}{name}"])
    for key, value in tensors.items():
        if key.startswith(OPTIMIZER):
            name, _, entry = key[len(OPTIMIZER) :].rpartition(".")
            parameter = by_name[name]
            parts.optimizer.state[parameter][entry] = value.to(
                parameter.device if value.ndim else value.device
            )
    parts.generator.set_state(tensors[ORDER_RANDOM])
    torch.set_rng_state(tensors[TORCH_RANDOM])
    if CUDA_RANDOM in tensors and torch.cuda.is_available():
        torch.cuda.set_rng_state(tensors[CUDA_RANDOM])
    device = parts.trainable[0][1].device if parts.trainable else torch.device("cpu")
    return {
        name: tensors[f"{BEST}{name}"].to(device)
        for name, _ in parts.trainable
        if f"{BEST}{name}" in tensors
    }


@dataclass(frozen=True)
class _Kind:
    """What one tensor of the file must be: its shape and dtype (None: any, as for an
    optimizer's step count and the generator of a device this machine lacks), whether the file
    must hold it, and the rule its values follow: "finite", "non-negative" (AdamW's mean
    squares), "count" (a step count: a whole number of the run's optimizer steps), "cpu" (a
    CPU generator's state) or "device" (another generator's state, which torch checks)."""

    shape: tuple[int, ...] | None
    dtype: torch.dtype | None
    required: bool = True
    rule: str = "finite"

    def problem(self, tensor: torch.Tensor, steps: int) -> str | None:
        """What is wrong with `tensor` (None when nothing is); `steps`: the optimizer's."""
        shape, dtype = tuple(tensor.shape), tensor.dtype
        if (self.shape is not None and shape != self.shape) or (
            self.dtype is not None and dtype != self.dtype
        ):
            wanted = "any" if self.shape is None else list(self.shape)
            return f"{dtype} of shape {list(shape)}, where this run has {self.dtype} of {wanted}"
        if self.rule in ("cpu", "device"):
            return _generator_problem(tensor, cpu=self.rule == "cpu")
        if self.rule == "count":
            if shape != () or not dtype.is_floating_point:
                return f"{dtype} of shape {list(shape)}, not a step count"
            count = float(tensor)
            if not (count.is_integer() and 1 <= count <= steps):
                return f"{count} steps, where the run has taken {steps} optimizer steps"
            return None
        if not bool(torch.isfinite(tensor).all()):
            return "holds values that are not finite"
        if self.rule == "non-negative" and bool((tensor < 0).any()):
            return "holds negative values, as no mean of squares does"
        return None


def _kinds(parts: Resumable, has_best: bool) -> dict[str, _Kind]:
    """Every tensor name the file may hold, with what it must be."""
    kinds: dict[str, _Kind] = {}
    entries = _optimizer_entries(parts)
    for name, parameter in parts.trainable:
        shape, dtype = tuple(parameter.shape), parameter.dtype
        kinds[f"{TRAINED}{name}"] = _Kind(shape, dtype)
        if has_best:
            kinds[f"{BEST}{name}"] = _Kind(shape, dtype)
        for entry in entries[name]:
            if entry.endswith(".step"):
                kinds[entry] = _Kind(None, None, required=False, rule="count")
            else:
                rule = "non-negative" if entry.endswith("_sq") else "finite"
                kinds[entry] = _Kind(shape, dtype, required=False, rule=rule)
    cpu = tuple(torch.get_rng_state().shape)
    kinds[ORDER_RANDOM] = _Kind(tuple(parts.generator.get_state().shape), torch.uint8, rule="cpu")
    kinds[TORCH_RANDOM] = _Kind(cpu, torch.uint8, rule="cpu")
    cuda = tuple(torch.cuda.get_rng_state().shape) if torch.cuda.is_available() else None
    kinds[CUDA_RANDOM] = _Kind(cuda, torch.uint8, required=False, rule="device")
    return kinds


def _optimizer_entries(parts: Resumable) -> dict[str, list[str]]:
    """Per trainable tensor, the names of AdamW's state of it in the file."""
    amsgrad = {
        id(p): group["amsgrad"] for group in parts.optimizer.param_groups for p in group["params"]
    }
    return {
        name: [
            f"{OPTIMIZER}{name}.{entry}"
            for entry in ("step", "exp_avg", "exp_avg_sq", "max_exp_avg_sq")
            if entry != "max_exp_avg_sq" or amsgrad.get(id(parameter), False)
        ]
        for name, parameter in parts.trainable
    }


def _generator_problem(tensor: torch.Tensor, cpu: bool) -> str | None:
    """What keeps `tensor` from being a random generator's state (a CPU one when `cpu`)."""
    if tensor.ndim != 1:
        return f"shape {list(tensor.shape)}, not a random generator's state"
    if cpu:
        try:
            torch.Generator().set_state(tensor)  # checked on a spare generator
        except RuntimeError:
            return "not a random generator's state"
    return None


def _scale(scaler: torch.amp.GradScaler, record: CheckpointRecord, folder: Path) -> dict[str, Any]:
    """The loss scale the record may hold: the run's settings with the record's scale and
    growth count when they are in range (fp16 training), else the run's own."""
    expected = _as_json(scaler.state_dict())
    if not scaler.is_enabled():
        if record.skipped:
            raise ConfigError(
                f"{folder / STATE}: skipped: {record.skipped} fp16 steps skipped, but this run "
                f"does not train in fp16; {afresh(folder)}"
            )
        return expected
    scale, tracker = record.scaler.get("scale"), record.scaler.get("_growth_tracker")
    if _is_number(scale) and 0 < scale <= torch.finfo(torch.float32).max:
        expected["scale"] = float(scale)
    if _is_int(tracker) and 0 <= tracker < expected["growth_interval"]:
        expected["_growth_tracker"] = tracker
    return expected


def _groups(parts: Resumable, rates: list[float]) -> list[dict[str, Any]]:
    """The optimizer's group settings at learning rates `rates`, tensors named."""
    names = {id(p): n for n, p in parts.trainable}
    return _as_json(
        [
            {k: v for k, v in group.items() if k != "params"}
            | {"lr": rate, "params": [names[id(p)] for p in group["params"]]}
            for group, rate in zip(parts.optimizer.param_groups, rates, strict=True)
        ]
    )


def _difference(found: Any, expected: Any, where: str) -> str | None:
    """Where `found` (read from a file) first differs from `expected` (numbers to a relative
    1e-9), as `where.key[i]: found, not expected`; None where they agree."""
    if isinstance(expected, dict):
        if not isinstance(found, dict):
            return f"{where}: {_shown(found)}, not an object"
        for key in [*expected, *found]:
            if key not in found or key not in expected:
                return f"{where}.{key}: {'missing' if key not in found else 'unknown field'}"
            differs = _difference(found[key], expected[key], f"{where}.{key}")
            if differs is not None:
                return differs
        return None
    if isinstance(expected, list):
        if not isinstance(found, list) or len(found) != len(expected):
            return f"{where}: {_shown(found)}, not {len(expected)} entries"
        for index, (one, other) in enumerate(zip(found, expected, strict=True)):
            differs = _difference(one, other, f"{where}[{index}]")
            if differs is not None:
                return differs
        return None
    if _is_number(expected):
        same = _is_number(found) and math.isclose(found, expected, rel_tol=1e-9)
    else:
        same = type(found) is type(expected) and found == expected
    return None if same else f"{where}: {_shown(found)}, not {expected!r}"


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> TypeGuard[float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _as_json(value: Any) -> Any:
    """`value` as JSON reads it back (tuples become lists)."""
    return json.loads(json.dumps(value))


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
