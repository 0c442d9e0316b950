"""`load_generative`: prompt-completion pairs or chats from a data file, a folder of split files
or a built-in generative corpus, in fixed train / dev / test splits.

A single file is split 80/10/10 by the fixed rule every single-source corpus follows (seed 0);
a folder's `train.*` and optional `dev.*` and `test.*` files (.jsonl, .csv, .tsv) keep their
splits, dev carved as 10% of train when only train and test are given. Rows are read by
`adaptlab.data.generative_rows`; `file_corpus` reads and splits preference data too
(`adaptlab.data.preference_loading`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TypeVar

from adaptlab.data.generative import (
    SHAPES,
    Conversation,
    CorpusT,
    GenerativeCorpus,
    PromptCompletion,
    Turn,
)
from adaptlab.data.generative_rows import PromptColumns, read_generative
from adaptlab.data.label_kind import LabelledTasks
from adaptlab.data.record_files import EXTENSIONS
from adaptlab.data.splits import carve_dev, three_way_split
from adaptlab.data.types import SPLIT_NAMES, Origin
from adaptlab.errors import ConfigError, DataError

Row = TypeVar("Row")
Rows = list[tuple[Row, Origin]]
"""Examples of one kind, each with the file and line it starts on."""


def as_chat(pair: PromptCompletion) -> Conversation:
    """A pair as a one-question chat: the prompt asked, the completion answered."""
    return Conversation((Turn("user", pair.prompt), Turn("assistant", pair.completion.strip())))


HOLDS = {"prompt-completion": PromptCompletion, "messages": Conversation}
"""The example each shape reads."""


def load_generative(
    source: str,
    tasks: LabelledTasks,
    *,
    shape: str,
    prompt_column: str = "prompt",
    completion_column: str = "completion",
) -> GenerativeCorpus:
    """The examples of `source`, a .jsonl / .csv / .tsv file, a folder of split files or a
    built-in generative corpus's name, read as `shape` ("prompt-completion", which also reads
    the Alpaca triple instruction / input / output, or "messages"). A built-in made of a
    labelled corpus reads it for its task among `tasks`."""
    if shape not in SHAPES:
        raise ConfigError(
            f"unknown generative data shape {shape!r}; use one of {', '.join(SHAPES)}"
        )
    columns = PromptColumns(prompt_column, completion_column)
    if prompt_column == completion_column:
        raise ConfigError(
            f"prompt_column and completion_column are both '{prompt_column}'; name two columns"
        )
    from adaptlab.data.generative_builtins import GENERATIVE_BUILTINS, shape_refusal

    if source in GENERATIVE_BUILTINS:
        if columns != PromptColumns():
            raise ConfigError(
                f"built-in {source} has its own columns; drop prompt_column and completion_column"
            )
        refusal = shape_refusal(source, shape)
        if refusal is not None:
            raise ConfigError(refusal)
        return _checked_builtin(source, GENERATIVE_BUILTINS[source](tasks), shape)
    path = Path(source).expanduser()
    if not path.exists():
        from adaptlab.data.preference_builtins import PREFERENCE_SHAPES_HELD

        if source in PREFERENCE_SHAPES_HELD:
            raise DataError(
                f"built-in {source} holds {PREFERENCE_SHAPES_HELD[source]} data, not {shape} "
                "data; learn it with a task that reads it (adaptlab data list names them)"
            )
        raise DataError(
            f"unknown generative data source '{source}': no such file or folder, and not a "
            f"built-in ({', '.join(GENERATIVE_BUILTINS) or 'none installed'}); give a "
            f"{', '.join(EXTENSIONS)} file, a folder of split files or a built-in"
        )
    return file_corpus(path, lambda file: read_generative(file, shape, columns), GenerativeCorpus)


def _checked_builtin(name: str, corpus: GenerativeCorpus, shape: str) -> GenerativeCorpus:
    """A built-in corpus as `shape` data (`shape_refusal` passed it): its pairs read
    as chats are one-question chats (the user's turn the prompt, the assistant's the answer),
    so an instruction-tuned model reads them through its chat template."""
    if shape == "messages" and all(
        isinstance(e, PromptCompletion) for split in corpus.splits.values() for e in split
    ):
        splits = {
            split: tuple(as_chat(pair) for pair in examples)  # type: ignore[arg-type]
            for split, examples in corpus.splits.items()
        }
        return replace(corpus, splits=splits, description=f"{corpus.description} As chats.")
    wanted = HOLDS[shape]
    if any(not isinstance(e, wanted) for split in corpus.splits.values() for e in split):
        raise DataError(f"built-in {name} does not hold the {shape} data it is declared to hold")
    return corpus


def file_corpus(path: Path, read: Callable[[Path], Rows[Row]], kind: type[CorpusT]) -> CorpusT:
    """The `kind` corpus of a data file, split by the fixed rules, or of a folder of split
    files (`folder_rows`); `read` reads each file."""
    if path.is_dir():
        return split_rows(path.resolve().name, f"folder {path}", folder_rows(path, read), kind)
    return split_rows(path.stem, f"file {path}", {"train": read(path)}, kind)


def folder_rows(folder: Path, read: Callable[[Path], Rows[Row]]) -> dict[str, Rows[Row]]:
    """The `train.*` and optional `dev.*` and `test.*` files of a folder, each read by
    `read`."""
    found: dict[str, Rows[Row]] = {}
    for split in SPLIT_NAMES:
        files = [
            folder / f"{split}{ext}" for ext in EXTENSIONS if (folder / f"{split}{ext}").is_file()
        ]
        if len(files) > 1:
            raise DataError(
                f"{folder} has several {split} files ({', '.join(f.name for f in files)}); keep one"
            )
        if files:
            found[split] = read(files[0])
    if "train" not in found:
        wanted = ", ".join(f"train{ext}" for ext in EXTENSIONS)
        raise DataError(f"{folder} has no training file; add one of {wanted}")
    return found


def split_rows(
    name: str, source: str, given: Mapping[str, Rows[Row]], kind: type[CorpusT]
) -> CorpusT:
    """The `kind` corpus of the rows `given` by split, missing dev / test splits filled in by
    the fixed rules (seed 0)."""
    train = given["train"]
    if "dev" not in given and "test" not in given:
        at = three_way_split([None] * len(train))
        splits = {split: _pick(train, ids) for split, ids in zip(SPLIT_NAMES, at, strict=True)}
        return _corpus(name, f"{source}, one source split 80/10/10 (seed 0)", splits, kind)
    if "test" not in given:
        raise DataError(f"{name} has a dev split but no test split; add a test file")
    if "dev" not in given:
        train_at, dev_at = carve_dev([None] * len(train))
        carved = {
            "train": _pick(train, train_at),
            "dev": _pick(train, dev_at),
            "test": given["test"],
        }
        return _corpus(name, f"{source}, dev carved as 10% of train (seed 0)", carved, kind)
    return _corpus(name, f"{source}, splits as given", given, kind)


def _pick(located: Rows[Row], indices: Sequence[int]) -> Rows[Row]:
    """The rows at `indices`, in that order."""
    return [located[index] for index in indices]


def _corpus(
    name: str, source: str, splits: Mapping[str, Rows[Row]], kind: type[CorpusT]
) -> CorpusT:
    """The corpus of three non-empty splits, with its description and origins."""
    for split in SPLIT_NAMES:
        if not splits[split]:
            raise DataError(
                f"the {split} split of {name} has no examples; add rows (splits cut from the "
                "training rows need at least 11 of them)"
            )
    sizes = ", ".join(f"{split} {len(splits[split])}" for split in SPLIT_NAMES)
    examples: dict[str, tuple[Row, ...]] = {
        split: tuple(example for example, _ in splits[split]) for split in SPLIT_NAMES
    }
    return kind(
        name=name,
        splits=examples,
        description=f"{source}: {sizes} examples.",
        origins={split: tuple(origin for _, origin in splits[split]) for split in SPLIT_NAMES},
    )
