"""`adaptlab eval --harness`: an adapter (or a base model alone) scored with
lm-evaluation-harness, and the options that apply with --harness and without it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import typer
from rich.table import Table
from typer._click.core import ParameterSource

from adaptlab.cli.console import console
from adaptlab.cli.options import comma_separated
from adaptlab.engine.stack_swap import parse_swaps
from adaptlab.errors import ConfigError

_WITH_HARNESS = {"adapter", "model", "batch_size", "device", "stack_swap", "as_json", "quantize"}
"""The options that still apply with --harness (besides its own)."""
_HARNESS_ONLY = {"harness_include", "num_fewshot", "limit", "harness_out"}
"""The options of --harness alone."""


@dataclass(frozen=True)
class HarnessCall:
    """What --harness and its options ask for."""

    tasks: str
    include: Path | None
    num_fewshot: int | None
    limit: int | None
    out: Path | None
    quantize: str | None


def check_harness_options(context: typer.Context, harness: str | None) -> None:
    """Refuse, in one line, an option that only scoring on --data reads given with --harness,
    and an option of --harness given without it."""
    given = {
        param.name: max(param.opts, key=len)
        for param in context.command.params
        if param.name and context.get_parameter_source(param.name) is ParameterSource.COMMANDLINE
    }
    harness_options = {*_WITH_HARNESS, *_HARNESS_ONLY, "harness"}
    if harness is not None:
        for name, flag in given.items():
            if name not in harness_options:
                raise ConfigError(
                    f"{flag} does not apply with --harness: lm-eval's tasks bring their own "
                    "data, prompts and settings; drop it"
                )
    else:
        for name, flag in given.items():
            if name in _HARNESS_ONLY:
                raise ConfigError(
                    f"{flag} is an option of --harness: add --harness TASKS, or drop it"
                )


def score_with_harness(
    call: HarnessCall,
    adapter: Path | None,
    model: str | None,
    batch_size: int,
    device: str,
    stack_swap: list[str] | None,
    as_json: bool,
) -> None:
    """Score the adapter (or the base `model` alone) with lm-evaluation-harness, print each
    task's metrics and where lm-eval's results JSON went."""
    from adaptlab.integrations.lm_eval import evaluate as harness_evaluate
    from adaptlab.integrations.lm_eval_results import metric_rows

    scored = harness_evaluate(
        adapter,
        comma_separated(call.tasks),
        model=model,
        include=call.include,
        num_fewshot=call.num_fewshot,
        limit=call.limit,
        batch_size=batch_size,
        device=device,
        out=call.out,
        stack_swaps=parse_swaps(stack_swap or []),
        quantize=call.quantize,
    )
    written = str(scored.written) if scored.written else None
    if as_json:
        print(json.dumps({"results": scored.results["results"], "written": written}))
        return
    table = Table(title=f"{adapter or model} on lm-eval {call.tasks}")
    for column in ("task", "metric", "value", "stderr"):
        table.add_column(column, justify="left" if column in ("task", "metric") else "right")
    for task, metric, value, stderr in metric_rows(scored.results):
        table.add_row(task, metric, _shown(value), _shown(stderr))
    out = console()
    out.print(table)
    kept = "give --harness-out DIR to keep them"
    note = f"written to {written}" if written else f"not written: {kept}"
    out.print(f"lm-eval results {note}", soft_wrap=True, highlight=False)


def _shown(value: Any) -> str:
    """A score as the table shows it: a number to 4 decimals, anything else as it is."""
    if isinstance(value, float | int) and not isinstance(value, bool):
        return f"{value:.4f}"
    return "" if value is None else str(value)
