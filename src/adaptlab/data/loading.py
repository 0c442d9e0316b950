"""`load_dataset`: one entry point for built-in corpora, data files and folders, and hf: sources."""

from pathlib import Path

from adaptlab.data.assemble import build_dataset
from adaptlab.data.builtin import BUILTINS, load_builtin
from adaptlab.data.files import read_path
from adaptlab.data.generative_builtins import GENERATIVE_SHAPES
from adaptlab.data.hf import read_hf
from adaptlab.data.label_kind import LabelledTasks
from adaptlab.data.readers import Columns
from adaptlab.data.types import Dataset
from adaptlab.errors import ConfigError, DataError

SPLITS = ("random", "chronological")


def _looks_like_path(source: str) -> bool:
    """Whether a source that does not exist was meant as a file path rather than a name."""
    return "/" in source or "\\" in source or bool(Path(source).suffix)


def load_dataset(
    source: str,
    tasks: LabelledTasks,
    *,
    text_column: str = "text",
    text_pair_column: str | None = None,
    label_column: str = "label",
    task: str | None = None,
    label_separator: str = "|",
    split: str = "random",
    time_column: str | None = None,
) -> Dataset:
    """Load a built-in corpus name, a CSV/TSV/JSONL/BIO file or split folder, or `hf:NAME[:CONFIG]`,
    for the labelled task `task` among `tasks` (None: the one its labels look like; a built-in's
    own). The data layer is handed the tasks (`adaptlab.tasks.registry.LABELLED`), never looks
    them up: `load_dataset("rotten-tomatoes", LABELLED)`.

    Column options and the separator apply to files and hf: sources; built-ins fix their own.
    `split="chronological"` splits one source's rows by `time_column` (earliest 80% train, then
    10% dev, latest 10% test); dated built-ins know their column. The default, "random", keeps
    given splits and otherwise splits 80/10/10 stratified (seed 0).
    """
    if task is not None:
        tasks.named(task)  # an unknown or unlabelled task is one line
    if not label_separator:
        raise ConfigError("label_separator must not be empty; the default is '|'")
    _check_roles(text_column, text_pair_column, label_column)
    chronological = _chronological(split, time_column, source in BUILTINS)
    if source in BUILTINS:
        _refuse_own_columns(source, text_column, text_pair_column, label_column, label_separator)
        return load_builtin(source, tasks, task, chronological)
    columns = Columns(
        text=text_column, label=label_column, text_pair=text_pair_column, time=time_column
    )
    if source.startswith("hf:"):
        spec = source.removeprefix("hf:")
        rows = read_hf(spec, columns)
        where = f"Hugging Face dataset {spec}"
        return build_dataset(
            spec, where, rows, task, tasks, label_separator, None, time_column, label_column
        )
    path = Path(source).expanduser()
    if path.exists() or _looks_like_path(source):
        rows = read_path(path, columns)
        kind = "folder" if path.is_dir() else "file"
        name = path.stem if path.is_file() else path.resolve().name
        where = f"{kind} {path}"
        return build_dataset(
            name, where, rows, task, tasks, label_separator, None, time_column, label_column
        )
    if source in GENERATIVE_SHAPES:
        raise not_labelled(source)
    raise DataError(
        f"unknown data source '{source}': no such file or folder, and not a built-in "
        f"({', '.join(BUILTINS)}); give a CSV/TSV/JSONL/BIO path, hf:NAME, or a built-in name"
    )


def not_labelled(source: str) -> DataError:
    """The error for a built-in generative corpus read as labelled data or plain text: what
    it holds, and the tasks that learn it."""
    pairs = GENERATIVE_SHAPES[source] == "prompt-completion"
    held = "prompt -> completion pairs" if pairs else "chats (messages)"
    tasks = "--task sft (or chat, seq2seq)" if pairs else "--task chat"
    return DataError(
        f"{source} is a built-in generative corpus of {held}, not labelled data or plain "
        f"text; learn it with {tasks} on a generative model"
    )


def _refuse_own_columns(
    source: str, text: str, pair: str | None, label: str, separator: str
) -> None:
    """Refuse column options for a built-in, which reads its own columns."""
    given = {
        "--text-column (text_column)": text != "text",
        "--text-pair-column (text_pair_column)": pair is not None,
        "--label-column (label_column)": label != "label",
        "label_separator": separator != "|",
    }
    for option, differs in given.items():
        if differs:
            raise ConfigError(f"built-in {source} reads its own columns; drop {option}")


def _check_roles(text: str, pair: str | None, label: str) -> None:
    """Refuse one column in two roles: a model that reads its label as its text is scored on
    reading the answer, and a text paired with itself is no pair."""
    if text == label:
        raise ConfigError(
            f"the text column and the label column are both '{text}': the model would read the "
            "answer; set --text-column (text_column) to the column holding the text"
        )
    if pair == label:
        raise ConfigError(
            f"the text pair column and the label column are both '{pair}': the model would read "
            "the answer; set --text-pair-column (text_pair_column) to the second text's column"
        )
    if pair == text:
        raise ConfigError(
            f"the text pair column and the text column are both '{text}': a text paired with "
            "itself; set --text-pair-column (text_pair_column) to the second text's column"
        )


def _chronological(split: str, time_column: str | None, builtin: bool) -> bool:
    """Whether to split by time; one-line errors for an unknown split or a missing column."""
    if split not in SPLITS:
        raise ConfigError(f"unknown split '{split}'; use one of {', '.join(SPLITS)}")
    if split == "random":
        if time_column is not None:
            raise ConfigError(f"time column '{time_column}' is for --split chronological")
        return False
    if builtin and time_column is not None:
        raise ConfigError("built-in data sets know their date column; drop --time-column")
    if not builtin and not time_column:
        raise ConfigError(
            "a chronological split needs the column that dates each row (--time-column)"
        )
    return True
