"""Options shared by several commands, and the checks that run on options as they are parsed
(so a bad number fails in one line before any model or data loads)."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

import adaptlab.checks as checks
from adaptlab.errors import ConfigError


def data_source(param: typer.CallbackParam, value: str | None) -> str | None:
    """Option callback: a data source that names something (an empty one would read the
    current folder as a data set)."""
    if value is not None and not value.strip():
        named = _flag(param) if param.param_type_name == "option" else str(param.name).upper()
        raise ConfigError(
            f"{named} is empty; give a built-in name (adaptlab data list), a data file or "
            "folder, or hf:NAME"
        )
    return value


DataOption = Annotated[
    str,
    typer.Option(
        "--data",
        help="Built-in corpus (rotten-tomatoes, 20newsgroups, reuters-r8, twitter-sentiment, "
        "wnut16-ner, slovenian-opinions), a CSV / TSV / JSONL / BIO file or folder, or hf:NAME.",
        callback=data_source,
    ),
]


def _device(value: str) -> str:
    """Option callback: the device, checked, with "auto" resolved to the best one here."""
    from adaptlab.models.device import torch_device

    return str(torch_device(value))


Device = Annotated[
    str,
    typer.Option(
        help="auto (CUDA, then MPS, then the CPU), cpu, cuda, cuda:N or mps.", callback=_device
    ),
]


Overwrite = Annotated[bool, typer.Option(help="Replace an existing --out folder.")]
Progress = Annotated[bool, typer.Option(help="Show a progress bar.")]
BaseModel = Annotated[
    str | None,
    typer.Option(
        "--model",
        help="Base model to load the adapter onto; default: the built-in or hub model its "
        "manifest names (a local folder must be given here).",
    ),
]

Head = Annotated[
    str | None,
    typer.Option(
        "--head",
        help="For an adapter combined from sources with different labels: the source whose "
        "head to use (adaptlab adapters show lists them).",
    ),
]


def _flag(param: typer.CallbackParam) -> str:
    """The option as the user typed it: `--batch-size`."""
    return max(param.opts, key=len) if param.opts else str(param.name)


def positive(param: typer.CallbackParam, value: int | None) -> int | None:
    """Option callback: a count of at least 1 (None passes: the option was left out)."""
    return None if value is None else checks.positive(value, _flag(param))


def at_least_two(param: typer.CallbackParam, value: int | None) -> int | None:
    """Option callback: an integer of at least 2 (token lengths, points, token samples)."""
    return None if value is None else checks.at_least(value, 2, _flag(param))


def non_negative(param: typer.CallbackParam, value: int | None) -> int | None:
    """Option callback: an integer of at least 0."""
    return None if value is None else checks.at_least(value, 0, _flag(param))


def seed(param: typer.CallbackParam, value: int | None) -> int | None:
    """Option callback: a seed in 0 .. 2**32 - 1."""
    return None if value is None else checks.seed(value, _flag(param))


def positive_finite(param: typer.CallbackParam, value: float | None) -> float | None:
    """Option callback: a finite number > 0 (not NaN, not infinite)."""
    return None if value is None else checks.positive_finite(value, _flag(param))


MaxLength = Annotated[
    int, typer.Option(help="Truncate inputs to this many tokens.", callback=at_least_two)
]


def key_values(pairs: list[str] | None, what: str) -> dict[str, Any]:
    """KEY=VALUE pairs as a dict, values parsed as JSON (else kept as text); `what` names them
    in the error for a pair without '='."""
    options: dict[str, Any] = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ConfigError(f"{what} {pair!r} is not KEY=VALUE")
        try:
            options[key] = json.loads(value)
        except json.JSONDecodeError:
            options[key] = value
    return options


def comma_separated(value: str | None) -> tuple[str, ...]:
    """A comma-separated option value as its parts, stripped, empty ones dropped (none for
    None): folders, data sets."""
    return tuple(part.strip() for part in value.split(",") if part.strip()) if value else ()
