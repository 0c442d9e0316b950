"""`load_preferences`: preference pairs, judged answers or questions from a data file, a folder of
split files or a built-in preference corpus, in fixed train / dev / test splits.

Splits follow the generative data's rules (`adaptlab.data.generative_loading`, whose helpers
this shares): one file is split 80/10/10 (seed 0); a folder's `train.*` and optional `dev.*`
and `test.*` files (.jsonl, .csv, .tsv) keep their splits, dev carved as 10% of train when only
train and test are given. Rows are read by `adaptlab.data.preference_rows`.
"""

from __future__ import annotations

from pathlib import Path

from adaptlab.data.generative_loading import file_corpus
from adaptlab.data.label_kind import LabelledTasks
from adaptlab.data.preference import (
    PREFERENCE_SHAPES,
    Judged,
    Preference,
    PreferenceCorpus,
    Question,
)
from adaptlab.data.preference_rows import PreferenceColumns, read_preferences
from adaptlab.data.record_files import EXTENSIONS
from adaptlab.errors import ConfigError, DataError

HOLDS = {"preference": Preference, "unpaired": Judged, "prompt-only": Question}
"""The example each shape reads."""


def load_preferences(
    source: str,
    tasks: LabelledTasks,
    *,
    shape: str,
    prompt_column: str = "prompt",
    chosen_column: str = "chosen",
    rejected_column: str = "rejected",
    completion_column: str = "completion",
    label_column: str = "label",
    answer_column: str = "answer",
) -> PreferenceCorpus:
    """The examples of `source`, a .jsonl / .csv / .tsv file, a folder of split files or a
    built-in preference corpus's name, read as `shape`: "preference" (prompt, chosen,
    rejected), "unpaired" (prompt, completion, label) or "prompt-only" (prompt and an optional
    reference answer), in TRL's text or conversational formats. A shape reads only its own
    columns; naming another's is refused. A built-in made of a labelled corpus reads it for its
    task among `tasks`."""
    if shape not in PREFERENCE_SHAPES:
        raise ConfigError(
            f"unknown preference data shape {shape!r}; use one of {', '.join(PREFERENCE_SHAPES)}"
        )
    columns = PreferenceColumns(
        prompt_column, chosen_column, rejected_column, completion_column, label_column,
        answer_column,
    )  # fmt: skip
    _check_options(columns, shape)
    from adaptlab.data.preference_builtins import PREFERENCE_BUILTINS, PREFERENCE_SHAPES_HELD

    if source in PREFERENCE_BUILTINS:
        if columns.changed():
            raise ConfigError(
                f"built-in {source} has its own columns; drop {', '.join(columns.changed())}"
            )
        held = PREFERENCE_SHAPES_HELD[source]
        if held != shape:
            raise ConfigError(
                f"built-in {source} holds {held} data, not {shape}; read it as {held}"
            )
        return _checked_builtin(source, PREFERENCE_BUILTINS[source](tasks), shape)
    path = Path(source).expanduser()
    if not path.exists():
        raise DataError(
            f"unknown preference data source '{source}': no such file or folder, and not a "
            f"built-in ({', '.join(PREFERENCE_BUILTINS) or 'none installed'}); give a "
            f"{', '.join(EXTENSIONS)} file, a folder of split files or a built-in"
        )
    return file_corpus(path, lambda file: read_preferences(file, shape, columns), PreferenceCorpus)


def _check_options(columns: PreferenceColumns, shape: str) -> None:
    """Refuse a column option `shape` does not read, and two parts read from one column."""
    read = columns.read(shape)
    unread = [option for option in columns.changed() if option not in read]
    if unread:
        raise ConfigError(
            f"{unread[0]} is not read for {shape} data (it reads {', '.join(read)}); drop it"
        )
    named: dict[str, str] = {}
    for option, column in read.items():
        if column in named:
            raise ConfigError(f"{named[column]} and {option} are both '{column}'; name two columns")
        named[column] = option


def _checked_builtin(name: str, corpus: PreferenceCorpus, shape: str) -> PreferenceCorpus:
    """A built-in corpus, checked to hold the `shape` examples it is declared to hold."""
    wanted = HOLDS[shape]
    if any(not isinstance(e, wanted) for split in corpus.splits.values() for e in split):
        raise DataError(f"built-in {name} does not hold the {shape} data it is declared to hold")
    return corpus
