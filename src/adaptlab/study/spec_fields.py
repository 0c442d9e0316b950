"""What every part of the study spec shares: strict models, seeds, learning rates, and the
checks and labels that several parts use."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Annotated, Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, PlainValidator

from adaptlab.checks import MAX_SEED
from adaptlab.errors import ConfigError
from adaptlab.integrations.trackers.choice import report_to

DEFAULT: Final = "default"


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
ReportTo = Annotated[tuple[str, ...], PlainValidator(_report_to)]
"""The experiment trackers every run of a study reports to (none: the empty tuple)."""
