"""`adaptlab eval`: score a trained adapter on a split of a data set."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from adaptlab.cli.console import console
from adaptlab.cli.options import (
    BaseModel,
    DataOption,
    Device,
    LabelColumn,
    MaxLength,
    Task,
    TextColumn,
    TextPairColumn,
    data_options,
    positive,
)
from adaptlab.data import TextEncoder, load_dataset
from adaptlab.train.choice import choose_metric
from adaptlab.train.classes import training_counts
from adaptlab.train.evaluate import evaluate as run_evaluation
from adaptlab.train.restore import check_data_fits, check_split, load_trained


def evaluate(
    adapter: Annotated[
        Path, typer.Option(help="Adapter folder, or a run folder holding adapter/.")
    ],
    data: DataOption,
    split: Annotated[
        str, typer.Option(help="train, dev or test (the data set's fixed splits).")
    ] = "test",
    batch_size: Annotated[int, typer.Option(help="Evaluation batch size.", callback=positive)] = 64,
    max_length: MaxLength = 128,
    text_column: TextColumn = "text",
    text_pair_column: TextPairColumn = None,
    label_column: LabelColumn = "label",
    task: Task = None,
    device: Device = "cpu",
    model: BaseModel = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the metrics as JSON.")] = False,
) -> None:
    """Evaluate a trained adapter on the fixed train / dev / test split of a data set.

    Example:

        adaptlab eval --adapter runs/rt-houlsby --data rotten-tomatoes --split test
    """
    check_split(split)
    loaded, manifest = load_trained(adapter, device, model=model)
    dataset = load_dataset(data, **data_options(text_column, text_pair_column, label_column, task))
    check_data_fits(dataset, manifest, data)
    labels = manifest.get("label_names") or []
    encoder = TextEncoder(loaded.tokenizer, dataset.task, len(labels), max_length)
    features = encoder.encode(dataset.splits[split])
    result = run_evaluation(loaded.model, encoder, features, dataset.task, labels, batch_size)
    counts = training_counts(dataset.task, dataset.splits["train"], labels)
    judged = choose_metric(dataset.task, counts)
    if as_json:
        print(
            json.dumps(
                {
                    "split": split,
                    "examples": len(features),
                    "loss": result.loss,
                    **result.metrics,
                    "judged_by": judged.metric,
                }
            )
        )
        return
    table = Table(title=f"{adapter} on {dataset.name} {split} ({len(features)} examples)")
    table.add_column("metric")
    table.add_column("value", justify="right")
    for name, value in {"loss": result.loss, **result.metrics}.items():
        table.add_row(name, f"{value:.4f}")
    out = console()
    out.print(table)
    out.print(f"judged by {judged.metric}: {judged.reason}", soft_wrap=True, highlight=False)
