"""The options that say what a training command trains, declared once for `adaptlab train` and
`adaptlab sequence`: --method with its --option pairs (taken as one `method: MethodSpec`) and
--epochs, --batch-size, --learning-rate, --warmup-ratio, --max-length and --seed (taken as one
`training: TrainConfig`), both under `@with_training_options(...)`
(`adaptlab.cli.option_group`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any

import typer

from adaptlab.cli.option_group import Command, with_option_group
from adaptlab.cli.options import MaxLength, key_values, positive, seed
from adaptlab.errors import ConfigError
from adaptlab.records.config import TrainConfig

if TYPE_CHECKING:  # the type only: commands load the methods when they run
    from adaptlab.methods.compose import MethodSpec

MethodOptions = Annotated[
    list[str] | None,
    typer.Option("--option", "-o", help="Method option KEY=VALUE (JSON value), repeatable."),
]
BatchSize = Annotated[int, typer.Option(help="Batch size.", callback=positive)]
LearningRate = Annotated[
    float | None, typer.Option(help="Learning rate; default 2e-5 (full, freeze) or 1e-4.")
]
WarmupRatio = Annotated[float, typer.Option(help="Share of steps for linear warm-up.")]
Seed = Annotated[
    int, typer.Option(help="Seed for sampling, initialisation and shuffling.", callback=seed)
]

DEFAULT_TRAINING = TrainConfig()
"""Every training option at its default: the `training` parameter's default in a command."""


def method_spec(method: str, option: list[str] | None) -> MethodSpec:
    """--method and its --option KEY=VALUE pairs: the method name, or {name: options} (values
    parsed as JSON)."""
    if not option:
        return method
    if "+" in method:
        raise ConfigError(f"--option applies to one method, not the combination {method!r}")
    return {method: key_values(option, "method option")}


def with_training_options(
    *, method: str, epochs: str, warmup: bool
) -> Callable[[Command], Command]:
    """Give a command --method and --option in place of its `method` parameter (their
    `method_spec`) and the training options in place of its `training` parameter (a
    TrainConfig); `method` and `epochs` are the help of --method and --epochs; without
    `warmup`, no --warmup-ratio (its default holds)."""
    methods = {
        "method": (Annotated[str, typer.Option(help=method)], "houlsby"),
        "option": (MethodOptions, None),
    }
    training: dict[str, tuple[Any, Any]] = {
        "epochs": (
            Annotated[int, typer.Option(help=epochs, callback=positive)],
            DEFAULT_TRAINING.epochs,
        ),
        "batch_size": (BatchSize, DEFAULT_TRAINING.batch_size),
        "learning_rate": (LearningRate, DEFAULT_TRAINING.learning_rate),
        "warmup_ratio": (WarmupRatio, DEFAULT_TRAINING.warmup_ratio),
        "max_length": (MaxLength, DEFAULT_TRAINING.max_length),
        "seed": (Seed, DEFAULT_TRAINING.seed),
    }
    if not warmup:
        del training["warmup_ratio"]
    with_method = with_option_group("method", method_spec, methods)
    with_training = with_option_group("training", TrainConfig, training)
    return lambda command: with_method(with_training(command))
