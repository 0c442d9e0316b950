"""`adaptlab train`: one training run, written to a folder."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path
from typing import Annotated

import typer

from adaptlab.cli.console import console
from adaptlab.cli.data_file_options import (
    DEFAULT_DATA_FILE,
    DataFileOptions,
    with_data_file_options,
)
from adaptlab.cli.generation_options import (
    DEFAULT_GENERATION,
    GenerationOptions,
    with_generation_options,
)
from adaptlab.cli.grpo_options import DEFAULT_GRPO, GrpoOptions, with_grpo_options
from adaptlab.cli.options import (
    DataOption,
    Device,
    Overwrite,
    Progress,
    comma_separated,
    positive,
)
from adaptlab.cli.preference_options import (
    DEFAULT_PREFERENCE,
    PreferenceOptions,
    with_preference_options,
)
from adaptlab.cli.run_core import ONE_PROCESS, Launch, run_training, training_command
from adaptlab.cli.scale_options import AUTO_SCALE
from adaptlab.cli.training_options import DEFAULT_TRAINING, with_training_options
from adaptlab.engine.run_checks import check_run
from adaptlab.engine.training_checkpoint import parse_every
from adaptlab.errors import ConfigError
from adaptlab.integrations.trackers.session import TrackedRun
from adaptlab.methods.compose import MethodSpec
from adaptlab.methods.configs.fusion import FUSION
from adaptlab.methods.frozen_cache import DEFAULT_MODE, MODES
from adaptlab.methods.registry import METHODS
from adaptlab.records.config import TrainConfig
from adaptlab.records.result import RunResult
from adaptlab.records.scale import Scale
from adaptlab.runs.run import RunSpec, check_frozen_cache, execute
from adaptlab.tasks.choice import choose_metric

FusedFolders = Annotated[
    str | None,
    typer.Option(
        help=f"With --method {FUSION}: trained run or adapter folders to fuse, comma-separated."
    ),
]
StackedFolders = Annotated[
    str | None,
    typer.Option(
        help="Trained run or adapter folders the new adapter is stacked on (frozen; "
        "comma-separated, bottom first), e.g. a language adapter."
    ),
]


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


@training_command
@with_data_file_options(split=True)
@with_generation_options()
@with_preference_options()
@with_grpo_options()
@with_training_options(method=method_help(), epochs="Training epochs.", warmup=True)
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
    method: MethodSpec = "houlsby",
    adapters: FusedFolders = None,
    stack: StackedFolders = None,
    train_size: Annotated[
        int | None,
        typer.Option(help="Sample n training examples (and n dev).", callback=positive),
    ] = None,
    training: TrainConfig = DEFAULT_TRAINING,
    data_file: DataFileOptions = DEFAULT_DATA_FILE,
    generation: GenerationOptions = DEFAULT_GENERATION,
    preference: PreferenceOptions = DEFAULT_PREFERENCE,
    grpo: GrpoOptions = DEFAULT_GRPO,
    device: Device = "auto",
    scale: Scale = AUTO_SCALE,
    overwrite: Overwrite = False,
    progress: Progress = True,
    frozen_cache: Annotated[
        str,
        typer.Option(
            help="Replay the frozen blocks' outputs after the first epoch (head, freeze, lst): "
            "auto, memory, disk or off; memory and disk are refused where the method trains "
            "from the first block.",
            callback=cache_mode,
        ),
    ] = DEFAULT_MODE,
    launch: Launch = ONE_PROCESS,
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

        adaptlab train --model smollm2-135m --data countries-qa --task sft --method lora \\
            --pack --out runs/qa-lora             # a decoder taught to answer questions

        adaptlab train --model smollm2-135m --data countries-qa-pairs --task dpo \\
            --method lora --stack runs/qa-lora --out runs/qa-dpo    # DPO on an SFT adapter

        adaptlab train --model ./llama-3-8b --data reviews.csv --method lora -o rank=16 \\
            --quantize nf4 --gradient-checkpointing --out runs/qlora     # QLoRA on one GPU
    """
    spec = RunSpec.build(
        model,
        data,
        method,
        train_size=train_size,
        train=training,
        data_options={
            **data_file.load_options(),
            **generation.load_options(),
            **preference.load_options(),
            **grpo.load_options(),
        },
        device=device,
        scale=scale,
        fuse=comma_separated(adapters),
        stack=comma_separated(stack),
    )
    check_frozen_cache(frozen_cache, spec.task)
    every = parse_every(checkpoint_every) if checkpoint_every else None

    def check() -> None:
        check_run(
            spec, out, overwrite=overwrite, checkpoint_every=every, resume=resume, shard=shard
        )

    def run() -> RunResult:
        return execute(
            spec,
            out,
            progress=progress,
            overwrite=overwrite,
            frozen_cache=frozen_cache,
            checkpoint_every=every,
            resume=resume,
            shard=shard,
        )

    def record(report: TrackedRun, result: RunResult) -> None:
        report.finished_run(result, out)

    run_training(
        spec, out, launch, check=check, run=run, record=record, show=partial(show, out=out)
    )


def show(result: RunResult, out: Path) -> None:
    """The best epoch's dev and test scores, the score the run is judged by, every test
    score, the counts of parameters and bytes, the time and the folder written."""
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
