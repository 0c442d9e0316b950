"""`adaptlab eval`: score a trained adapter on a split of a data set."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table
from torch import nn

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
from adaptlab.cli.options import BaseModel, DataOption, Device, MaxLength, positive
from adaptlab.data.encoding import TextEncoder
from adaptlab.data.loading import load_dataset
from adaptlab.data.masking import MaskedLmEncoder
from adaptlab.data.texts import load_texts
from adaptlab.engine.restore import check_data_fits, check_split, load_trained
from adaptlab.engine.stack_swap import parse_swaps, stack_swapped
from adaptlab.errors import ConfigError
from adaptlab.models.device import torch_device
from adaptlab.models.loading import LoadedModel, load_model
from adaptlab.tasks.choice import choose_metric
from adaptlab.tasks.evaluation import Evaluation
from adaptlab.tasks.evaluation import evaluate as run_evaluation
from adaptlab.tasks.generative import GenerativeTask
from adaptlab.tasks.generative_evaluation import Scored
from adaptlab.tasks.generative_trained import score_trained
from adaptlab.tasks.judging import MetricChoice
from adaptlab.tasks.mlm_objective import MlmEvaluation, evaluate_mlm
from adaptlab.tasks.registry import get_task


@with_data_file_options()
@with_generation_options()
def evaluate(
    data: DataOption,
    adapter: Annotated[
        Path | None,
        typer.Option(
            help="Adapter folder, or a run folder holding adapter/; omitted, the base --model "
            "itself is scored (generative tasks: name one with --task)."
        ),
    ] = None,
    split: Annotated[
        str, typer.Option(help="train, dev or test (the data set's fixed splits).")
    ] = "test",
    batch_size: Annotated[int, typer.Option(help="Evaluation batch size.", callback=positive)] = 64,
    max_length: MaxLength = 128,
    data_file: DataFileOptions = DEFAULT_DATA_FILE,
    generation: GenerationOptions = DEFAULT_GENERATION,
    device: Device = "auto",
    model: BaseModel = None,
    stack_swap: Annotated[
        list[str] | None,
        typer.Option(
            "--stack-swap",
            help="NAME=FOLDER: run the adapter of run or adapter FOLDER in place of the "
            "stacked adapter NAME, e.g. lang-en=runs/lang-sl (repeatable).",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the metrics as JSON.")] = False,
) -> None:
    """Evaluate a trained adapter on the fixed train / dev / test split of a data set.

    Example:

        adaptlab eval --adapter runs/rt-houlsby --data rotten-tomatoes --split test

        adaptlab eval --adapter runs/qa-lora --data countries-qa --task sft --max-new-tokens 16

        adaptlab eval --model smollm2-135m --data countries-qa --task sft     # the base alone

        adaptlab eval --adapter runs/task --data slovenian-opinions \\
            --stack-swap lang-en=runs/lang-sl                  # MAD-X zero-shot transfer
    """
    check_split(split)
    swaps = parse_swaps(stack_swap or [])
    options = data_file.load_options()
    if adapter is None:
        loaded, manifest = _base_model(model, data_file.task, device)
    else:
        loaded, manifest = load_trained(adapter, device, model=model)
    judged: MetricChoice | None = None
    result: Evaluation | MlmEvaluation | Scored
    task = get_task(manifest["task"])
    if not isinstance(task, GenerativeTask):
        generation.refuse_for(task.name)
    with stack_swapped(loaded.model, swaps):
        if isinstance(task, GenerativeTask):
            options = {**options, **generation.load_options()}
            on_split = score_trained(
                loaded, manifest, task, data, options, split, max_length, batch_size
            )
            name, count, result = on_split.name, on_split.examples, on_split.scored
        elif not task.labelled:
            name, count, result = _masked_lm(loaded, data, options, split, max_length, batch_size)
        else:
            name, count, result, judged = _labelled(
                loaded, manifest, data, options, split, max_length, batch_size
            )
    if as_json:
        judged_by = {"judged_by": judged.metric} if judged else {}
        scores = {"loss": result.loss, **result.metrics, **judged_by}
        print(json.dumps({"split": split, "examples": count, **scores}))
        return
    table = Table(title=f"{adapter or model} on {name} {split} ({count} examples)")
    table.add_column("metric")
    table.add_column("value", justify="right")
    for metric, value in {"loss": result.loss, **result.metrics}.items():
        table.add_row(metric, f"{value:.4f}")
    out = console()
    out.print(table)
    if judged is not None:
        out.print(f"judged by {judged.metric}: {judged.reason}", soft_wrap=True, highlight=False)


def _base_model(
    model: str | None, task: str | None, device: str
) -> tuple[LoadedModel, dict[str, Any]]:
    """The base `model` alone, as a trained adapter's model would be scored, for a generative
    `task` (a classifier's head would be untrained)."""
    if model is None or task is None or not isinstance(get_task(task), GenerativeTask):
        raise ConfigError(
            "give --adapter, or score a base model on a generative task with --model and "
            "--task causal-lm, sft or chat"
        )
    loaded = load_model(model, get_task(task).model_kind)
    base: nn.Module = loaded.model
    base.to(torch_device(device)).eval()
    return loaded, {"task": task}


def _labelled(
    loaded: LoadedModel,
    manifest: dict[str, Any],
    data: str,
    options: dict[str, Any],
    split: str,
    max_length: int,
    batch_size: int,
) -> tuple[str, int, Evaluation, MetricChoice]:
    """A labelled data set's split scored, its labels matched to the adapter's by name, and
    the metric that judges it."""
    dataset = check_data_fits(load_dataset(data, **options), manifest, data)
    labels = manifest.get("label_names") or []
    encoder = TextEncoder(loaded.tokenizer, dataset.task, len(labels), max_length)
    features = encoder.encode(dataset.splits[split])
    result = run_evaluation(loaded.model, encoder, features, dataset.task, labels, batch_size)
    counts = get_task(dataset.task).training_counts(dataset.splits["train"], labels)
    return dataset.name, len(features), result, choose_metric(dataset.task, counts)


def _masked_lm(
    loaded: LoadedModel,
    data: str,
    options: dict[str, Any],
    split: str,
    max_length: int,
    batch_size: int,
) -> tuple[str, int, MlmEvaluation]:
    """A masked-LM adapter scored on the texts of a split (BERT masking, fixed seed)."""
    corpus = load_texts(data, **options)
    encoder = MaskedLmEncoder(loaded.tokenizer, max_length)
    features = encoder.encode(corpus.splits[split])
    return corpus.name, len(features), evaluate_mlm(loaded.model, encoder, features, batch_size)
