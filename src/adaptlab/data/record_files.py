"""The JSONL, CSV and TSV files generative and preference data are read from: one example a
record, each with the file and line it starts on. How a record becomes an example is the
caller's (a reader chosen from the file's header or first record)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from adaptlab.data.readers import TABLE_DELIMITERS, jsonl_objects, no_rows, table_records
from adaptlab.data.types import Origin
from adaptlab.errors import DataError

EXTENSIONS = (".jsonl", *TABLE_DELIMITERS)

Example = TypeVar("Example")
RecordReader = Callable[[Mapping[str, object], str], Example]
"""Turns one record (its fields by column) into an example, `where` naming it in errors."""


def checked_suffix(path: Path) -> str:
    """The extension of a data file, lower-cased; one not in `EXTENSIONS` is an error."""
    suffix = path.suffix.lower()
    if suffix not in EXTENSIONS:
        raise DataError(
            f"unknown data file extension '{path.suffix}' for {path}; use one of "
            f"{', '.join(EXTENSIONS)}"
        )
    return suffix


def table_examples(
    path: Path, text: str, reader_for: Callable[[list[str]], RecordReader[Example]]
) -> list[tuple[Example, Origin]]:
    """The examples of a CSV or TSV file with a header, read by `reader_for(header)`."""
    header, records = table_records(path, text, TABLE_DELIMITERS[path.suffix.lower()])
    if not header:
        raise no_rows(path)
    reader = reader_for(header)
    return [
        (reader(record.fields, record.where(path)), Origin(path.name, record.first))
        for record in records
    ]


def jsonl_examples(
    path: Path,
    text: str,
    reader_for: Callable[[int, str, dict[str, Any], list[str]], RecordReader[Example]],
) -> list[tuple[Example, Origin]]:
    """The examples of a JSONL file (`jsonl_objects`: blank lines are skipped), read by
    `reader_for(line, where, record, keys)` of its first record."""
    located: list[tuple[Example, Origin]] = []
    reader: RecordReader[Example] | None = None
    for number, where, record, keys in jsonl_objects(path, text):
        reader = reader or reader_for(number, where, record, keys)
        located.append((reader(record, where), Origin(path.name, number)))
    return located


def check_columns(found: Sequence[str], wanted: Iterable[tuple[str, str]], where: str) -> None:
    """Fail naming the first column of `wanted` (column, what to do when it is missing) that
    `found` lacks, or one that `found` names twice (which to read would be a guess)."""
    for name, fix in wanted:
        if name not in found:
            raise missing_column(name, found, where, fix)
        if list(found).count(name) > 1:
            raise DataError(
                f"{where} names column '{name}' more than once; rename or drop the others so "
                "it is clear which to read"
            )


def missing_column(name: str, found: Sequence[str], where: str, fix: str) -> DataError:
    """The error for a column a record or header lacks, listing the columns it has."""
    listed = ", ".join(found) or "none"
    return DataError(f"column '{name}' not found in {where} (columns found: {listed}); {fix}")
