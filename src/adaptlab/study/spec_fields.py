"""What every part of the study spec shares: strict models, seeds, learning rates, and the
checks and labels that several parts use."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from typing import Annotated, Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, PlainValidator

from adaptlab.checks import MAX_SEED
from adaptlab.errors import ConfigError
from adaptlab.integrations.trackers.choice import report_to

DEFAULT: Final = "default"
SPEC_FOLDER: Final = "folder"
"""The key of the spec's folder in the validation context `load_spec` gives: relative paths
are read from it."""


class StrictModel(BaseModel):
    """A part of the spec: unknown keys are errors, values are not coerced, and it is frozen."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


def refuse_repeats(values: Iterable[object]) -> None:
    """Fail on the first value listed a second time."""
    seen: list[object] = []
    for value in values:
        if value in seen:
            raise ValueError(f"{value!r} is listed twice")
        seen.append(value)


def refuse_repeated_labels(kind: str, labels: Sequence[str]) -> None:
    """Fail when two entries of `kind` (methods, strategies) show the same label."""
    for index, label in enumerate(labels):
        if label in labels[:index]:
            raise ValueError(
                f"{kind} {labels.index(label)} and {index} are both labelled {label!r}; "
                "remove one or give one a `label:`"
            )


def options_label(options: dict[str, Any]) -> str:
    """The options written in the spec, for a label: `(hidden_size=64)`, or "" for none."""
    if not options:
        return ""
    text = ", ".join(
        f"{key}={value if isinstance(value, str) else json.dumps(value)}"
        for key, value in options.items()
    )
    return f"({text})"


def _learning_rates(value: object) -> tuple[float, ...] | Literal["default"]:
    """`default`, or a non-empty list of distinct numbers in (0, 1)."""
    if value == DEFAULT:
        return DEFAULT
    if not isinstance(value, list) or not value:
        raise ValueError("must be `default` or a list of numbers such as [1e-4, 3e-4]")
    for index, rate in enumerate(value):
        if isinstance(rate, bool) or not isinstance(rate, int | float) or not 0 < rate < 1:
            raise ValueError(f"item {index} must be a number in (0, 1), got {rate!r}")
    refuse_repeats(value)
    return tuple(float(rate) for rate in value)


def _betas(value: object) -> tuple[float, ...]:
    """A non-empty list of distinct finite numbers above 0."""
    if not isinstance(value, list) or not value:
        raise ValueError("must be a list of numbers above 0 such as [0.1, 0.5]")
    for index, beta in enumerate(value):
        if isinstance(beta, bool) or not isinstance(beta, int | float) or not 0 < beta < math.inf:
            raise ValueError(f"item {index} must be a finite number above 0, got {beta!r}")
    refuse_repeats(value)
    return tuple(float(beta) for beta in value)


def _report_to(value: object) -> tuple[str, ...]:
    """`none`, a tracker or a list of trackers (`adaptlab.integrations.trackers.choice`)."""
    if not isinstance(value, str | list) or not all(isinstance(name, str) for name in value):
        raise ValueError(
            "must be none, tensorboard, mlflow or a list such as [tensorboard, mlflow]"
        )
    try:
        return report_to(value, "report_to")
    except ConfigError as error:
        raise ValueError(str(error).removeprefix("report_to: ")) from None


Seed = Annotated[int, Field(ge=0, le=MAX_SEED)]
"""A seed every random generator takes (adaptlab.checks)."""
LearningRates = Annotated[tuple[float, ...] | Literal["default"], PlainValidator(_learning_rates)]
Betas = Annotated[tuple[float, ...], PlainValidator(_betas)]
"""The betas a study crosses its preference entries with (none: the empty tuple)."""
ReportTo = Annotated[tuple[str, ...], PlainValidator(_report_to)]
"""The experiment trackers every run of a study reports to (none: the empty tuple)."""
