"""`adaptlab data`: look at built-in corpora and data files before training on them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from adaptlab.cli.console import console
from adaptlab.cli.data_file_options import (
    DEFAULT_DATA_FILE,
    DataFileOptions,
    with_data_file_options,
)
from adaptlab.cli.options import data_source
from adaptlab.cli.pairs_cmd import pairs
from adaptlab.data.builtin import BUILTINS
from adaptlab.data.describe import describe
from adaptlab.data.generative import Conversation, GenerativeExample, PromptCompletion
from adaptlab.data.generative_builtins import (
    GENERATIVE_SHAPES,
    generative_builtin_datasets,
    shape_refusal,
)
from adaptlab.data.generative_loading import load_generative
from adaptlab.data.loading import load_dataset
from adaptlab.data.preference import (
    PREFERENCE_SHAPES,
    Judged,
    Preference,
    PreferenceExample,
)
from adaptlab.data.preference_builtins import PREFERENCE_SHAPES_HELD, preference_builtin_datasets
from adaptlab.data.preference_loading import load_preferences
from adaptlab.data.preference_writing import messages_of
from adaptlab.data.texts import load_texts
from adaptlab.data.types import SPLIT_NAMES
from adaptlab.errors import ConfigError
from adaptlab.tasks.generative import GenerativeTask
from adaptlab.tasks.registry import LABELLED, get_task, task_names

app = typer.Typer(
    help="Inspect data sets; make preference pairs from a model's own answers.",
    no_args_is_help=True,
)
app.command("pairs")(pairs)

SHOWN_CHARACTERS = 300
"""Characters of a document `data show` prints (documents may be whole books)."""


@app.command("list")
def list_builtin() -> None:
    """List the built-in offline corpora: labelled ones, generative ones (prompt ->
    completion pairs, chats) and preference-family ones (pairs, judged answers, questions),
    with the tasks that read each.

    Example:

        adaptlab data list
    """
    table = Table(title="built-in data sets")
    table.add_column("name")
    table.add_column("task")
    table.add_column("description")
    for name, entry in BUILTINS.items():
        table.add_row(name, entry.task, entry.summary)
    for name, summary in generative_builtin_datasets().items():
        table.add_row(name, ", ".join(_generative_tasks(name)), summary)
    for name, summary in preference_builtin_datasets().items():
        table.add_row(name, ", ".join(_preference_tasks(name)), summary)
    console().print(table)


@app.command("show")
@with_data_file_options(split=True)
def show(
    source: Annotated[
        str,
        typer.Argument(
            help="Built-in name (adaptlab data list), data file or folder, or hf:NAME.",
            callback=data_source,
        ),
    ],
    data_file: DataFileOptions = DEFAULT_DATA_FILE,
) -> None:
    """Show a data set's splits, sizes, label counts and two examples; with the task of a
    generative model (--task sft, chat, causal-lm...) or for a built-in generative corpus,
    its splits and two examples as that task reads them.

    Example:

        adaptlab data show rotten-tomatoes

        adaptlab data show comments.csv --split chronological --time-column date

        adaptlab data show countries-qa
    """
    task = get_task(data_file.task) if data_file.task else None
    if source in GENERATIVE_SHAPES and task is None:
        task = get_task(_generative_tasks(source)[0])
    if source in PREFERENCE_SHAPES_HELD and task is None:
        task = get_task(_preference_tasks(source)[0])
    if task is not None and not task.labelled:
        _show_unlabelled(source, task.name, data_file.load_options())
        return
    dataset = load_dataset(source, LABELLED, **data_file.load_options())
    info = describe(dataset)
    out = console()
    out.print(Text.assemble((dataset.name, "bold"), f" ({dataset.task}): {dataset.description}"))
    splits = info["splits"]
    table = Table()  # one column per split, one row per label: any number of labels fits
    table.add_column("")
    for split in splits:
        table.add_column(split, justify="right")
    table.add_row("examples", *(f"{summary['size']:,}" for summary in splits.values()))
    for label in next(iter(splits.values()))["labels"]:
        values = [summary["labels"].get(label, 0) for summary in splits.values()]
        table.add_row(label, *(f"{v:,}" if isinstance(v, int) else f"{v:.3g}" for v in values))
    out.print(table)
    for example in info["examples"]:
        out.print(example, highlight=False)


def _generative_tasks(name: str) -> list[str]:
    """The tasks that read built-in generative corpus `name` (its shape, or chats made of its
    pairs), in listing order."""
    return task_names(
        lambda task: (
            isinstance(task, GenerativeTask)
            and task.data_shape is not None
            and shape_refusal(name, task.data_shape) is None
        )
    )


def _preference_tasks(name: str) -> list[str]:
    """The tasks that read built-in preference-family corpus `name`, in listing order."""
    held = PREFERENCE_SHAPES_HELD[name]
    return task_names(lambda task: getattr(task, "data_shape", None) == held)


def _show_unlabelled(source: str, task_name: str, options: Mapping[str, Any]) -> None:
    """The splits of `source` read for unlabelled task `task_name`: plain documents, or
    prompt -> completion pairs and chats, with their sizes and two training examples."""
    task = get_task(task_name)
    shape = task.data_shape if isinstance(task, GenerativeTask) else None
    if shape is None:
        texts = load_texts(source, LABELLED, **options)
        name, description, unit = texts.name, texts.description, "documents"
        examples: Sequence[object] = [_cut(text) for text in texts.splits["train"][:2]]
        sizes = [len(texts.splits[split]) for split in SPLIT_NAMES]
    elif shape in PREFERENCE_SHAPES:
        _refuse_options(source, shape, options)
        read = load_preferences(source, LABELLED, shape=shape)
        name, description, unit = read.name, read.description, "examples"
        examples = [_example(example) for example in read.splits["train"][:2]]
        sizes = [len(read.splits[split]) for split in SPLIT_NAMES]
    else:
        _refuse_options(source, shape, options)
        corpus = load_generative(source, LABELLED, shape=shape)
        name, description, unit = corpus.name, corpus.description, "examples"
        examples = [_example(example) for example in corpus.splits["train"][:2]]
        sizes = [len(corpus.splits[split]) for split in SPLIT_NAMES]
    out = console()
    out.print(Text.assemble((name, "bold"), f" ({task.name}): {description}"))
    table = Table()
    table.add_column("")
    for split in SPLIT_NAMES:
        table.add_column(split, justify="right")
    table.add_row(unit, *(f"{size:,}" for size in sizes))
    out.print(table)
    for example in examples:
        out.print(example, highlight=False)


def _refuse_options(source: str, shape: str, options: Mapping[str, Any]) -> None:
    """Pairs and chats are read from their own columns: a labelled data option is refused."""
    given = sorted(key for key in options if key != "task")
    if given:
        option = "--" + given[0].replace("_", "-")
        raise ConfigError(
            f"{option} reads labelled data; {source} is read as {shape} data, so drop {option}"
        )


def _example(example: GenerativeExample | PreferenceExample) -> dict[str, Any]:
    """An example (a pair, a chat, a preference, a judged answer, a question) as plain JSON
    values."""
    if isinstance(example, Conversation):
        return {"messages": messages_of(example.turns)}
    if isinstance(example, PromptCompletion):
        return {"prompt": example.prompt, "completion": example.completion}
    prompt = example.prompt if isinstance(example.prompt, str) else messages_of(example.prompt)
    if isinstance(example, Preference):
        return {"prompt": prompt, "chosen": example.chosen, "rejected": example.rejected}
    if isinstance(example, Judged):
        return {"prompt": prompt, "completion": example.completion, "label": example.desirable}
    return {"prompt": prompt, "answer": example.answer}


def _cut(text: str) -> str:
    """A document cut to `SHOWN_CHARACTERS`."""
    return text if len(text) <= SHOWN_CHARACTERS else text[: SHOWN_CHARACTERS - 3] + "..."
