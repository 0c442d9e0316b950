"""`adaptlab sequence`: one model through a sequence of data sets, with a continual strategy."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from adaptlab.cli.console import console
from adaptlab.cli.generation_options import (
    ChatTemplate,
    CompletionColumn,
    GenerationOptions,
    PromptColumn,
    Stop,
    TrainOnPrompt,
)
from adaptlab.cli.option_group import Command, with_option_group
from adaptlab.cli.options import (
    Device,
    Overwrite,
    Progress,
    comma_separated,
    key_values,
    positive,
)
from adaptlab.cli.run_core import ONE_PROCESS, Launch, run_training, training_command
from adaptlab.cli.scale_options import AUTO_SCALE
from adaptlab.cli.training_options import DEFAULT_TRAINING, with_training_options
from adaptlab.continual.objectives import (
    DEFAULT_OBJECTIVE,
    OBJECTIVES,
    refuse_unread_by_objective,
)
from adaptlab.continual.registry import StrategyEntry, list_strategies
from adaptlab.continual.result import SequenceResult
from adaptlab.continual.run import (
    SEQUENCE_FILE,
    SEQUENCE_FOLDER,
    run_sequence,
    sequence_inputs,
)
from adaptlab.continual.spec import SequenceSpec
from adaptlab.engine.outputs import ADAPTER_FOLDER
from adaptlab.errors import ConfigError
from adaptlab.folders import check_result_folder
from adaptlab.integrations.trackers.session import TrackedRun
from adaptlab.methods.compose import MethodSpec
from adaptlab.records.config import TrainConfig
from adaptlab.records.scale import Scale

MaxNewTokens = Annotated[
    int,
    typer.Option(help="Tokens generated per test prompt of an sft or chat stage (exact match)."),
]
STAGE_GENERATION = GenerationOptions()
"""Every generative stage option at its default (the command's `generation` parameter)."""


def with_stage_generation_options() -> Callable[[Command], Command]:
    """The generative data options of `adaptlab train` that an sft or chat stage reads (not
    --pack or --metric: a sequence trains in padded batches and keeps each stage's epoch of
    lowest dev perplexity)."""
    kinds = {
        "prompt_column": PromptColumn,
        "completion_column": CompletionColumn,
        "train_on_prompt": TrainOnPrompt,
        "chat_template": ChatTemplate,
        "max_new_tokens": MaxNewTokens,
        "stop": Stop,
    }
    options = {name: (kind, getattr(STAGE_GENERATION, name)) for name, kind in kinds.items()}
    return with_option_group("generation", GenerationOptions, options)


@training_command
@with_stage_generation_options()
@with_training_options(
    method="Method or combination each stage trains, e.g. houlsby, lora.",
    epochs="Epochs per stage.",
    warmup=False,
)
def sequence(
    model: Annotated[
        str, typer.Option(help="minilm-l6, mpnet-base, smollm2-135m, a HF name or a folder.")
    ],
    stages: Annotated[
        str,
        typer.Option(
            help="Data sets in training order, comma-separated (built-in names or files), "
            "e.g. reuters-r8,20newsgroups,twitter-sentiment,rotten-tomatoes."
        ),
    ],
    out: Annotated[Path, typer.Option(help=f"Folder to write ({SEQUENCE_FILE}).")],
    objective: Annotated[
        str,
        typer.Option(help=" or ".join(f"{o.name} ({o.description})" for o in OBJECTIVES) + "."),
    ] = DEFAULT_OBJECTIVE,
    strategy: Annotated[
        str,
        typer.Option(
            help="Continual strategy (options and objectives below): "
            + ", ".join(entry.name for entry in list_strategies())
            + "."
        ),
    ] = "sequential",
    strategy_option: Annotated[
        list[str] | None,
        typer.Option(
            "--strategy-option",
            "-s",
            help="Strategy option KEY=VALUE (JSON value), repeatable, e.g. -s rate=0.05.",
        ),
    ] = None,
    method: MethodSpec = "houlsby",
    train_size: Annotated[
        int | None,
        typer.Option(help="Sample n training examples (and n dev) per stage.", callback=positive),
    ] = None,
    test_size: Annotated[
        int | None,
        typer.Option(
            help="Cap each stage's test set (a seeded sample, stratified by label for "
            "classification).",
            callback=positive,
        ),
    ] = None,
    single_stage: Annotated[
        bool,
        typer.Option(help="Also train each later stage alone, for forward transfer."),
    ] = False,
    training: TrainConfig = DEFAULT_TRAINING,
    generation: GenerationOptions = STAGE_GENERATION,
    device: Device = "auto",
    scale: Scale = AUTO_SCALE,
    overwrite: Overwrite = False,
    progress: Progress = True,
    launch: Launch = ONE_PROCESS,
) -> None:
    """Train one model through data sets in order and test every stage after each.

    Each stage gets a new head; the score matrix is printed with average score, BWT, FWT and
    forgetting. With --objective causal-lm the model is a causal LM (e.g. smollm2-135m) trained
    on each stage's text in turn, and the matrix holds held-out perplexities; with --objective
    sft or chat it learns each stage's answers (prompt -> completion pairs, chats, read as
    `adaptlab train --task sft|chat` reads them), and the matrix holds the perplexity of each
    stage's test answers.

    Example:

        adaptlab sequence --model minilm-l6 --stages reuters-r8,20newsgroups \\
            --method houlsby --strategy replay -s rate=0.01 --train-size 1000 \\
            --test-size 500 --epochs 3 --out runs/seq-replay

        adaptlab sequence --objective causal-lm --model smollm2-135m \\
            --stages reuters-r8,20newsgroups --method lora --strategy kd-logit \\
            --train-size 500 --test-size 200 --epochs 1 --max-length 64 --out runs/lm-kd

        adaptlab sequence --objective sft --model smollm2-135m \\
            --stages countries-qa,grimm-summaries --method lora --strategy replay -s rate=0.1 \\
            --train-size 200 --test-size 50 --max-new-tokens 24 --out runs/sft-replay
    """
    names = distinct_stages(comma_separated(stages))
    if single_stage and len(names) < 2:
        raise ConfigError(
            "--single-stage trains each stage after the first alone; give two --stages or more"
        )
    spec = SequenceSpec.build(
        model,
        names,
        method,
        strategy,
        key_values(strategy_option, "strategy option"),
        train_size=train_size,
        test_size=test_size,
        train=training,
        device=device,
        scale=scale,
        single_stage=single_stage,
        stage_options=stage_options(generation, objective, len(names)),
        objective=objective,
    )

    def check() -> None:
        check_result_folder(out, overwrite, SEQUENCE_FOLDER, sequence_inputs(spec))

    def run() -> SequenceResult:
        return run_sequence(spec, out, progress=progress, overwrite=overwrite)

    run_training(
        spec,
        out,
        launch,
        check=check,
        run=run,
        record=TrackedRun.finished_sequence,
        show=partial(show, out=out),
    )


def distinct_stages(names: tuple[str, ...]) -> tuple[str, ...]:
    """--stages, none named twice (a file by where it is, however its path is written): a
    stage twice is one data set learnt and tested twice, not a sequence of them."""
    seen: dict[str, str] = {}
    for name in names:
        path = Path(name)
        where = str(path.resolve()) if path.exists() else name
        if where in seen:
            same = "" if seen[where] == name else f" (as {seen[where]} and {name})"
            raise ConfigError(
                f"--stages names {name} twice{same}; give each data set once, a sequence "
                "learns them in turn"
            )
        seen[where] = name
    return names


def stage_options(
    generation: GenerationOptions, objective: str, stages: int
) -> tuple[dict[str, Any], ...]:
    """The generative options given, as every stage's reading options (none given: no stage
    options, so the spec and its id stay as they were); one line for an option `objective`'s
    stages do not read."""
    given = generation.load_options()
    if not given:
        return ()
    refuse_unread_by_objective(given, objective)
    return (given,) * stages


def strategies_help(entries: list[StrategyEntry]) -> str:
    """One line per strategy: its name, its options as `-s KEY=DEFAULT`, what it does and the
    objectives it runs on (the registry's declarations, so plug-ins show up too)."""
    lines = ["Strategies (-s KEY=VALUE sets an option; shown with its default):"]
    for entry in entries:
        options = "".join(f" -s {key}={value}" for key, value in entry.options.items())
        objectives = ", ".join(entry.objectives)
        lines.append(f"- {entry.name}{options}: {entry.description}. Objectives: {objectives}.")
    return "\n".join(lines)


EPILOGS = {"sequence": strategies_help(list_strategies())}
"""The command's strategies, from the registry (shown after its options)."""


def show(result: SequenceResult, out: Path) -> None:
    """The matrix (rows: after stage i; columns: tested on stage j), the scores, and where
    they (and a causal-LM, sft or chat sequence's adapter) were written, `out`."""
    names = [stage.name for stage in result.stages]
    table = Table(title=f"{result.metric} after each stage ({result.spec.strategy.name})")
    table.add_column("after \\ on")
    for name in names:
        table.add_column(name, justify="right")
    for name, row in zip(names, result.matrix, strict=True):
        table.add_row(name, *(f"{value:.4f}" for value in row))
    shown = console()
    shown.print(table)
    scores = result.scores
    parts = [f"average {scores.average:.4f}"]
    for label, value in (
        ("BWT", scores.backward_transfer),
        ("FWT", scores.forward_transfer),
        ("forgetting", scores.average_forgetting),
    ):
        if value is not None:
            parts.append(f"{label} {value:+.4f}")
    shown.print(", ".join(parts), highlight=False)
    shown.print(f"written to {out / SEQUENCE_FILE}", highlight=False, soft_wrap=True)
    if (out / ADAPTER_FOLDER).is_dir():  # the kept adapter, for `adaptlab serve`
        shown.print(f"adapter in {out / ADAPTER_FOLDER}", highlight=False, soft_wrap=True)
