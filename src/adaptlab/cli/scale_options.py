"""The options that set a run's scale (`adaptlab.records.scale.Scale`), declared once for the
commands that train: --precision, --base-dtype, --quantize, --gradient-checkpointing and
--offload-activations. A command takes them as one parameter,
`scale: Scale = AUTO_SCALE`, under `@with_scale_options()` (which `adaptlab train` and
`adaptlab sequence` get from `adaptlab.cli.run_core.training_command`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated

import typer

from adaptlab.cli.option_group import Command, with_option_group
from adaptlab.records.scale import Scale

Precision = Annotated[
    str,
    typer.Option(
        help="auto (bf16 on a GPU that has it, else fp32), fp32, bf16 or fp16 (with loss "
        "scaling): what forward and backward compute in; what trains stays float32."
    ),
]
BaseDtype = Annotated[
    str,
    typer.Option(help="fp32, bf16 or fp16: the frozen base weights' dtype (needs that precision)."),
]
Quantize = Annotated[
    str | None,
    typer.Option(
        help="nf4 (4-bit, QLoRA) or int8: quantise the frozen base's linear layers; for "
        "methods that leave base weights frozen."
    ),
]
Checkpointing = Annotated[
    bool,
    typer.Option(help="Keep only each layer's input for the backward pass and recompute the rest."),
]
Offload = Annotated[
    bool,
    typer.Option(
        help="Keep what the backward pass needs in host memory (long sequences on a GPU)."
    ),
]

AUTO_SCALE = Scale(precision="auto")
"""Every option at its default: the `scale` parameter's default in a command."""

_OPTIONS = {
    "precision": (Precision, "auto"),
    "base_dtype": (BaseDtype, "fp32"),
    "quantize": (Quantize, None),
    "gradient_checkpointing": (Checkpointing, False),
    "offload_activations": (Offload, False),
}


def with_scale_options() -> Callable[[Command], Command]:
    """Give a command the scale options in place of its `scale` parameter."""
    return with_option_group("scale", Scale, _OPTIONS)
