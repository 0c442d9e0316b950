"""`adaptlab train`: one training run, written to a folder."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from adaptlab.cli.console import console
from adaptlab.cli.data_file_options import (
    DEFAULT_DATA_FILE,
    DataFileOptions,
    with_data_file_options,
)
from adaptlab.cli.options import (
    DataOption,
    Device,
    MaxLength,
    Processes,
    ReportTo,
    comma_separated,
    method_spec,
    positive,
    seed,
)
from adaptlab.cli.relaunch import Oversubscribe, errors_to_launcher, relaunched
from adaptlab.cli.scale_options import AUTO_SCALE, with_scale_options
from adaptlab.engine.run import RunSpec, execute
from adaptlab.engine.run_checks import check_run
from adaptlab.engine.training_checkpoint import parse_every
from adaptlab.errors import ConfigError
from adaptlab.integrations.trackers.choice import folder_tracking
from adaptlab.integrations.trackers.session import track
from adaptlab.methods.configs.fusion import FUSION
from adaptlab.methods.frozen_cache import MODES
from adaptlab.methods.registry import METHODS
from adaptlab.parallel.ranks import is_main_process
from adaptlab.records.config import TrainConfig
from adaptlab.records.scale import Scale
from adaptlab.tasks.choice import choose_metric


def method_help() -> str:
    """--method's help, made from the method registry."""
    alone = METHODS.names(lambda method: method.exclusive)
    return (
        f"Method, or methods joined by '+' (lora+bitfit): {', '.join(METHODS.names())} "
        f"({', '.join(alone)} stand alone); or {FUSION}, over --adapters. "
        "`adaptlab methods` describes them."
    )


def cache_mode(value: str) -> str:
    """--frozen-cache: one of the cache's modes."""
    if value not in MODES:
        raise ConfigError(f"--frozen-cache must be one of {', '.join(MODES)}, got {value!r}")
    return value


def checkpoint_cadence(value: str | None) -> str | None:
    """--checkpoint-every: 'epoch' or a positive number of steps."""
    if value is not None:
        parse_every(value)
    return value


@errors_to_launcher
@with_data_file_options(split=True)
@with_scale_options()
def train(
    model: Annotated[
        str,
        typer.Option(
            help="minilm-l6, mpnet-base, smollm2-135m, multilingual-e5-small, a HF name or "
            "a folder."
        ),
    ],
    data: DataOption,
    out: Annotated[
        Path,
        typer.Option(help="Run folder to write (adapter/, metrics.json, splits.json, train.log)."),
    ],
    method: Annotated[str, typer.Option(help=method_help())] = "houlsby",
    option: Annotated[
        list[str] | None,
        typer.Option("--option", "-o", help="Method option KEY=VALUE (JSON value), repeatable."),
    ] = None,
    adapters: Annotated[
        str | None,
        typer.Option(
            help=f"With --method {FUSION}: trained run or adapter folders to fuse, comma-separated."
        ),
    ] = None,
    stack: Annotated[
        str | None,
        typer.Option(
            help="Trained run or adapter folders the new adapter is stacked on (frozen; "
            "comma-separated, bottom first), e.g. a language adapter."
        ),
    ] = None,
    train_size: Annotated[
        int | None,
        typer.Option(help="Sample n training examples (and n dev).", callback=positive),
    ] = None,
    epochs: Annotated[int, typer.Option(help="Training epochs.", callback=positive)] = 10,
    batch_size: Annotated[int, typer.Option(help="Batch size.", callback=positive)] = 16,
    learning_rate: Annotated[
        float | None, typer.Option(help="Learning rate; default 2e-5 (full, freeze) or 1e-4.")
    ] = None,
    warmup_ratio: Annotated[float, typer.Option(help="Share of steps for linear warm-up.")] = 0.1,
    max_length: MaxLength = 128,
    seed: Annotated[
        int,
        typer.Option(help="Seed for sampling, initialisation and shuffling.", callback=seed),
    ] = 0,
    data_file: DataFileOptions = DEFAULT_DATA_FILE,
    device: Device = "auto",
    scale: Scale = AUTO_SCALE,
    overwrite: Annotated[bool, typer.Option(help="Replace an existing --out folder.")] = False,
    progress: Annotated[bool, typer.Option(help="Show a progress bar.")] = True,
    frozen_cache: Annotated[
        str,
        typer.Option(
            help="Replay the frozen blocks' outputs after the first epoch (head, freeze, lst): "
            "auto, memory, disk or off.",
            callback=cache_mode,
        ),
    ] = "auto",
    report_to: ReportTo = "none",
    nproc: Processes = 1,
    oversubscribe: Oversubscribe = False,
    checkpoint_every: Annotated[
        str | None,
        typer.Option(
            help="Keep a checkpoint beside --out every N steps or at each 'epoch' end.",
            callback=checkpoint_cadence,
        ),
    ] = None,
    resume: Annotated[
        bool, typer.Option(help="Go on from the checkpoint a killed run left beside --out.")
    ] = False,
    shard: Annotated[
        bool,
        typer.Option(
            help="Shard the model over the --nproc processes (FSDP2): each holds a part of "
            "the frozen base, gathered block by block."
        ),
    ] = False,
) -> None:
    """Adapt a model to a data set, keep the best epoch on dev, and test it.

    Example:

        adaptlab train --model minilm-l6 --data rotten-tomatoes --method houlsby \\
            --train-size 1000 --epochs 10 --seed 0 --out runs/rt-houlsby

        adaptlab train --model minilm-l6 --data reviews.csv --method lora -o rank=16 --out runs/lora

        adaptlab train --model minilm-l6 --data rotten-tomatoes --method fusion \\
            --adapters runs/sst,runs/topics,runs/rt-pfeiffer --out runs/rt-fusion

        adaptlab train --model multilingual-e5-small --data english.txt --task mlm \\
            --method pfeiffer --out runs/lang-en                # a language adapter

        adaptlab train --model minilm-l6 --data reviews.csv --method houlsby \\
            --stack runs/lang-en --out runs/task

        adaptlab train --model ./llama-3-8b --data reviews.csv --method lora -o rank=16 \\
            --quantize nf4 --gradient-checkpointing --out runs/qlora     # QLoRA on one GPU
    """
    spec = RunSpec.build(
        model,
        data,
        method_spec(method, option),
        train_size=train_size,
        train=TrainConfig(
            epochs=epochs,
            batch_size=batch_size,
            learning_rate=learning_rate,
            warmup_ratio=warmup_ratio,
            max_length=max_length,
            seed=seed,
        ),
        data_options=data_file.load_options(),
        device=device,
        scale=scale,
        fuse=comma_separated(adapters),
        stack=comma_separated(stack),
    )
    tracking = folder_tracking(report_to, out)
    every = parse_every(checkpoint_every) if checkpoint_every else None

    def check() -> None:
        check_run(
            spec, out, overwrite=overwrite, checkpoint_every=every, resume=resume, shard=shard
        )

    if relaunched(nproc, device, oversubscribe=oversubscribe, check=check):
        return
    with track(tracking, spec.to_dict()) as report:
        result = execute(
            spec,
            out,
            progress=progress,
            overwrite=overwrite,
            frozen_cache=frozen_cache,
            checkpoint_every=every,
            resume=resume,
            shard=shard,
        )
        report.finished_run(result, out)
    if not is_main_process():
        return
    out_console = console()
    metric = result.metric
    out_console.print(
        f"best epoch {result.best_epoch}: dev {metric} {result.dev[metric]:.4f}, "
        f"test {metric} {result.test[metric]:.4f}"
    )
    judged = choose_metric(result.data.task, result.data.train_counts)
    out_console.print(
        f"judged by {judged.metric}: test {result.test[judged.metric]:.4f} ({judged.reason})",
        soft_wrap=True,
        highlight=False,
    )
    out_console.print(json.dumps(dict(result.test), indent=None), highlight=False)
    out_console.print(
        f"trainable {result.trainable_parameters:,} of {result.total_parameters:,} "
        f"parameters; adapter {result.adapter_bytes or 0:,} bytes; "
        f"{result.wall_seconds or 0:.0f} s; written to {out}"
    )
