"""What a tracker records, named once for every tracker: the scalars of a step, of an epoch and
of a finished run or sequence, and a spec as flat parameters.

Names: `train/loss` and `train/learning_rate` per optimiser step; `dev/<metric>`, `dev/loss`
and `train/epoch_loss` per epoch (a sequence's stage puts its name first:
`stage_2_3_reuters-r8/dev/accuracy`); `test/<metric>` and `test/loss` when a run ends, and for
a sequence its final row `test/<stage>/<metric>` with `test/average`, `test/backward_transfer`,
`test/forward_transfer`, `test/forgetting`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # records only; nothing here loads a model
    from adaptlab.continual.result import SequenceResult
    from adaptlab.records.result import EpochRecord, RunResult


def stage_prefix(title: str) -> str:
    """The scalar-name prefix of a loop title: "" for a plain run, `stage_1_2_name/` for the
    stage "stage 1/2 name " of a sequence (letters, digits, '.', '-' kept; the rest '_')."""
    name = _name(title)
    return f"{name}/" if name else ""


def step_scalars(loss: float, learning_rate: float) -> dict[str, float]:
    """One optimiser step's scalars."""
    return {"train/loss": loss, "train/learning_rate": learning_rate}


def epoch_scalars(record: EpochRecord, prefix: str) -> dict[str, float]:
    """One epoch's scalars: its dev scores, dev loss and mean training loss."""
    scores = {f"{prefix}dev/{name}": value for name, value in record.dev_metrics.items()}
    return {
        **scores,
        f"{prefix}dev/loss": record.dev_loss,
        f"{prefix}train/epoch_loss": record.train_loss,
    }


def run_scalars(result: RunResult) -> dict[str, float]:
    """A finished run's test scores (of the epoch it kept) and test loss."""
    return {
        **{f"test/{name}": value for name, value in result.test.items()},
        "test/loss": result.test_loss,
    }


def sequence_scalars(result: SequenceResult) -> dict[str, float]:
    """A finished sequence's scores on every stage after the last one, and its summary."""
    values = {
        f"test/{_name(stage.name)}/{name}": value
        for stage, scores in zip(result.stages, result.tests[-1], strict=True)
        for name, value in scores.items()
    }
    summary = result.scores
    for name, value in (
        ("average", summary.average),
        ("backward_transfer", summary.backward_transfer),
        ("forward_transfer", summary.forward_transfer),
        ("forgetting", summary.average_forgetting),
    ):
        if value is not None:
            values[f"test/{name}"] = value
    return values


def flat_params(spec: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """A spec's JSON form as flat `a.b.c` -> text parameters (list items by index; empty lists
    and mappings, numbers, booleans and null as JSON)."""
    params: dict[str, str] = {}
    for key, value in spec.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            params |= flat_params(value, f"{name}.")
        elif isinstance(value, list | tuple) and value:
            params |= flat_params({str(i): item for i, item in enumerate(value)}, f"{name}.")
        elif isinstance(value, str):
            params[name] = value
        else:
            params[name] = json.dumps(dict(value) if isinstance(value, Mapping) else value)
    return params


def _name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9.-]+", "_", text.strip()).strip("_")
