"""`adaptlab eval`: score a trained adapter on a split of a data set."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table
from torch import nn

from adaptlab.cli.adapter_task import adapter_task, check_adapter_options
from adaptlab.cli.console import console
from adaptlab.cli.data_file_options import (
    DEFAULT_DATA_FILE,
    DataFileOptions,
    with_data_file_options,
)
from adaptlab.cli.eval_harness import HarnessCall, check_harness_options, score_with_harness
from adaptlab.cli.generation_options import (
    DEFAULT_GENERATION,
    GenerationOptions,
    with_generation_options,
)
from adaptlab.cli.options import (
    BaseModel,
    Device,
    Head,
    MaxLength,
    non_negative,
    positive,
)
from adaptlab.cli.preference_options import (
    DEFAULT_PREFERENCE,
    PreferenceOptions,
    with_preference_options,
)
from adaptlab.cli.recorded_objective import recorded_options
from adaptlab.data.chat_render import kept_template
from adaptlab.data.encoding import TextEncoder
from adaptlab.data.loading import load_dataset
from adaptlab.data.masking import MaskedLmEncoder
from adaptlab.data.texts import load_texts
from adaptlab.engine.restore import check_data_fits, check_split, load_trained
from adaptlab.engine.stack_swap import parse_swaps, stack_swapped
from adaptlab.errors import ConfigError
from adaptlab.models.device import torch_device
from adaptlab.models.loading import LoadedModel, load_model
from adaptlab.models.quantize import check_quantize_kind, quantize_base
from adaptlab.runs.evaluation import Evaluation
from adaptlab.runs.evaluation import evaluate as run_evaluation
from adaptlab.runs.generative_evaluation import Scored
from adaptlab.runs.generative_trained import SplitRequest, score_trained
from adaptlab.runs.mlm_objective import MlmEvaluation, evaluate_mlm
from adaptlab.runs.preference_trained import score_preferences, score_rewards
from adaptlab.tasks.choice import choose_metric
from adaptlab.tasks.generative import GenerativeTask
from adaptlab.tasks.judging import MetricChoice
from adaptlab.tasks.preference import PreferenceTask
from adaptlab.tasks.registry import LABELLED, get_task
from adaptlab.tasks.reward import RewardModel
from adaptlab.tasks.task import Task
from adaptlab.tasks.unread_options import refuse_unread_by_task

EVAL_GENERATION = (
    "prompt_column",
    "completion_column",
    "train_on_prompt",
    "chat_template",
    "max_new_tokens",
    "stop",
)
"""The generative options scoring reads (not --pack or --metric: nothing trains, and every
metric is shown)."""
EVAL_PREFERENCE = (
    "beta",
    "loss",
    "simpo_gamma",
    "desirable_weight",
    "undesirable_weight",
    "center_rewards_coefficient",
)
"""The preference options scoring reads (not --precompute-reference: nothing trains)."""


@with_data_file_options()
@with_generation_options(EVAL_GENERATION)
@with_preference_options(EVAL_PREFERENCE)
def evaluate(
    context: typer.Context,
    data: Annotated[
        str | None,
        typer.Option(
            "--data",
            help="Built-in corpus (rotten-tomatoes, 20newsgroups, reuters-r8, twitter-sentiment, "
            "wnut16-ner, slovenian-opinions), a CSV / TSV / JSONL / BIO file or folder, or "
            "hf:NAME; not with --harness.",
        ),
    ] = None,
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
    preference: PreferenceOptions = DEFAULT_PREFERENCE,
    device: Device = "auto",
    model: BaseModel = None,
    head: Head = None,
    quantize: Annotated[
        str | None,
        typer.Option(
            help="nf4 or int8: quantise the base's linear layers before the adapter loads, as "
            "a run trained with --quantize (QLoRA) ran."
        ),
    ] = None,
    stack_swap: Annotated[
        list[str] | None,
        typer.Option(
            "--stack-swap",
            help="NAME=FOLDER: run the adapter of run or adapter FOLDER in place of the "
            "stacked adapter NAME, e.g. lang-en=runs/lang-sl (repeatable).",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the metrics as JSON.")] = False,
    harness: Annotated[
        str | None,
        typer.Option(
            help="lm-evaluation-harness tasks, comma-separated (`lm-eval ls tasks` lists them): "
            "score the adapter, or --model alone, with lm-eval instead of on --data (needs "
            "the harness extra).",
        ),
    ] = None,
    harness_include: Annotated[
        Path | None, typer.Option(help="A folder of your own lm-eval task YAML files (--harness).")
    ] = None,
    num_fewshot: Annotated[
        int | None,
        typer.Option(
            help="Examples shown before each one scored (--harness; default: the task's own).",
            callback=non_negative,
        ),
    ] = None,
    limit: Annotated[
        int | None,
        typer.Option(
            help="Score the first N examples of each task (--harness).", callback=positive
        ),
    ] = None,
    harness_out: Annotated[
        Path | None,
        typer.Option(
            help="Folder for lm-eval's results JSON (--harness; default: lm_eval/ in the run "
            "folder, or in an adapter folder outside a run; a base model alone: not written)."
        ),
    ] = None,
) -> None:
    """Evaluate a trained adapter on the fixed train / dev / test split of a data set, or on
    lm-evaluation-harness tasks (--harness).

    Example:

        adaptlab eval --adapter runs/rt-houlsby --data rotten-tomatoes --split test

        adaptlab eval --adapter runs/qa-lora --data countries-qa --task sft --max-new-tokens 16

        adaptlab eval --model smollm2-135m --data countries-qa --task sft     # the base alone

        adaptlab eval --adapter runs/task --data slovenian-opinions \\
            --stack-swap lang-en=runs/lang-sl                  # MAD-X zero-shot transfer

        adaptlab eval --adapter runs/qa-dpo --data countries-qa-pairs    # reward accuracy

        adaptlab eval --adapter runs/qa-lora --harness arc_easy,hellaswag --limit 200
    """
    check_harness_options(context, harness)
    if quantize is not None:
        check_quantize_kind(quantize, "--quantize")
    if harness is not None:
        harnessed = HarnessCall(harness, harness_include, num_fewshot, limit, harness_out, quantize)
        score_with_harness(harnessed, adapter, model, batch_size, device, stack_swap, as_json)
        return
    if data is None:
        raise ConfigError(
            "give --data, the data set to score on (or --harness TASKS to score with "
            "lm-evaluation-harness)"
        )
    check_split(split)
    swaps = parse_swaps(stack_swap or [])
    options = {
        **data_file.load_options(),
        **generation.load_options(),
        **preference.load_options(),
    }
    if adapter is None:
        if head is not None:
            raise ConfigError("--head picks the head of a combined adapter: give --adapter")
        base, base_task = _base_task(model, data_file.task)
        refuse_unread_by_task(options, base_task, "task")
        loaded, manifest = _base_model(base, base_task, device, quantize)
    else:
        trained_task = adapter_task(adapter, head)
        if trained_task is not None:  # else loading says the manifest names none
            check_adapter_options(options, trained_task, data_file.task)
        options = recorded_options(adapter, trained_task, EVAL_PREFERENCE, options)
        loaded, manifest = load_trained(adapter, device, model=model, head=head, quantize=quantize)
    kept = None if adapter is None else kept_template(manifest, adapter)
    judged: MetricChoice | None = None
    result: Evaluation | MlmEvaluation | Scored
    task = get_task(manifest["task"])
    request = SplitRequest(loaded, kept, data, options, split, max_length, batch_size)
    with stack_swapped(loaded.model, swaps):
        if isinstance(task, PreferenceTask | RewardModel | GenerativeTask):
            if isinstance(task, PreferenceTask):
                on_split = score_preferences(task, request)
            elif isinstance(task, RewardModel):
                on_split = score_rewards(task, request)
            else:
                on_split = score_trained(task, request)
            name, count, result = on_split.name, on_split.examples, on_split.scored
        elif not task.labelled:
            name, count, result = _masked_lm(request)
        else:
            name, count, result, judged = _labelled(request, manifest)
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


def _base_task(model: str | None, task: str | None) -> tuple[str, Task]:
    """The base `model` scored alone, and the generative `task` it is scored on (a
    classifier's head would be untrained)."""
    found = get_task(task) if task is not None else None
    if model is None or not isinstance(found, GenerativeTask):
        raise ConfigError(
            "give --adapter, or score a base model on a generative task with --model and "
            "--task causal-lm, sft or chat"
        )
    return model, found


def _base_model(
    model: str, task: Task, device: str, quantize: str | None
) -> tuple[LoadedModel, dict[str, Any]]:
    """The base `model` alone, as a trained adapter's model would be scored, for `task`."""
    loaded = load_model(model, task.model_kind)
    base: nn.Module = loaded.model
    base.to(torch_device(device)).eval()
    if quantize is not None:
        quantize_base(base, quantize)
    return loaded, {"task": task.name}


def _labelled(
    request: SplitRequest, manifest: dict[str, Any]
) -> tuple[str, int, Evaluation, MetricChoice]:
    """A labelled data set's split scored, its labels matched to the adapter's by name, and
    the metric that judges it."""
    data, loaded = request.data, request.loaded
    dataset = check_data_fits(load_dataset(data, LABELLED, **request.options), manifest, data)
    labels = manifest.get("label_names") or []
    task = get_task(dataset.task)
    encoder = TextEncoder(loaded.tokenizer, task, len(labels), request.max_length)
    features = encoder.encode(dataset.splits[request.split])
    result = run_evaluation(
        loaded.model, encoder, features, dataset.task, labels, request.batch_size
    )
    counts = task.training_counts(dataset.splits["train"], labels)
    return dataset.name, len(features), result, choose_metric(dataset.task, counts)


def _masked_lm(request: SplitRequest) -> tuple[str, int, MlmEvaluation]:
    """A masked-LM adapter scored on the texts of a split (BERT masking, fixed seed)."""
    corpus = load_texts(request.data, LABELLED, **request.options)
    encoder = MaskedLmEncoder(request.loaded.tokenizer, request.max_length)
    features = encoder.encode(corpus.splits[request.split])
    scored = evaluate_mlm(request.loaded.model, encoder, features, request.batch_size)
    return corpus.name, len(features), scored
