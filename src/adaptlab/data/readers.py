"""Parse CSV/TSV, JSONL and BIO files into raw rows, with line-numbered errors."""

import csv
import io
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from adaptlab.data.types import Origin
from adaptlab.errors import DataError

TABLE_DELIMITERS = {".csv": ",", ".tsv": "\t"}
"""The delimited text files read, by extension, and their delimiters."""


@dataclass(frozen=True)
class Columns:
    """Which fields of a record hold the text, the optional second text, the label and the
    optional time (for chronological splits)."""

    text: str = "text"
    label: str = "label"
    text_pair: str | None = None
    time: str | None = None


@dataclass(frozen=True)
class RawRow:
    """A record as read, before its label is parsed; `where` locates it in error messages,
    `origin` in the split record a run keeps."""

    text: str | tuple[str, ...]
    label: str | tuple[str, ...]
    where: str
    origin: Origin
    text_pair: str | None = None
    time: str | None = None


@dataclass(frozen=True)
class TableRecord:
    """One record of a delimited file: its fields by column, and the lines it spans."""

    first: int
    last: int
    fields: dict[str, str]

    def where(self, path: Path | str) -> str:
        """`reviews.csv line 7`, or `lines 7-9` for a quoted field over several lines."""
        return f"{path} {_lines(self.first, self.last)}"


def decode_utf8(raw: bytes, path: Path) -> str:
    """Decode a file as UTF-8 (a BOM allowed) or fail naming the first bad line."""
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        line = raw[: error.start].count(b"\n") + 1
        raise DataError(
            f"{path} line {line} is not UTF-8 text; re-save the file with UTF-8 encoding"
        ) from None


def read_bytes(path: Path) -> bytes:
    """Read a file or fail with a one-line error."""
    try:
        return path.read_bytes()
    except OSError as error:
        raise DataError(f"cannot read {path}: {error.strerror}") from None


def no_rows(path: Path) -> DataError:
    """The error for a file without a single usable data row."""
    return DataError(f"{path} has no data rows (rows with blank text are skipped); add some")


def _check_columns(found: list[str], columns: Columns, where: str) -> None:
    """Fail naming the first configured column that the header or record lacks."""
    for role, name in (
        ("text_column", columns.text),
        ("label_column", columns.label),
        ("text_pair_column", columns.text_pair),
        ("time_column", columns.time),
    ):
        if name is not None and name not in found:
            listed = ", ".join(found) or "none"
            raise DataError(
                f"column '{name}' not found in {where} (columns found: {listed}); "
                f"set {role} to one of them"
            )


def _refuse_repeated(found: list[str], columns: Columns, where: str) -> None:
    """Fail when a header (or record) names a column that is used (text, pair, label, time) more
    than once: which of them to read would be a guess."""
    for name in (columns.text, columns.label, columns.text_pair, columns.time):
        if name is not None and found.count(name) > 1:
            raise DataError(
                f"{where} names column '{name}' more than once; rename or drop the others "
                "so it is clear which to read"
            )


def _is_blank(value: object) -> bool:
    """Whether a text or label cell holds nothing: None, spaces, an empty list."""
    if value is None:
        return True
    if isinstance(value, str):
        return not value.strip()
    return isinstance(value, tuple | list) and not value


def keep_row(text: object, label: object, where: str, label_read: bool = True) -> bool:
    """Whether to keep a record: one with a blank text is dropped, unless its label (when a
    label is read) is blank too: a record with neither is a broken line, not a text to skip."""
    if not _is_blank(text):
        return True
    if label_read and _is_blank(label):
        raise DataError(
            f"{where} has an empty text and an empty label; fill them in or delete that record"
        )
    return False


def _lines(first: int, last: int) -> str:
    """`line 7`, or `lines 7-9` for a record whose quoted field spans several lines."""
    return f"line {first}" if first >= last else f"lines {first}-{last}"


def _csv_error(path: Path, line: int, error: csv.Error) -> DataError:
    """A CSV parse error as one line naming the line where the bad record starts."""
    reason = str(error)
    if "field larger than field limit" in reason:
        reason = (
            f"a field longer than {csv.field_size_limit():,} characters (often a quote that "
            "is never closed)"
        )
    elif "unexpected end of data" in reason:
        reason = "a quoted field that is never closed (a '\"' without its partner)"
    return DataError(f"{path} line {line} is not valid CSV/TSV: {reason}; fix that record")


def _field_count(record: TableRecord, path: Path, found: int, header: int, delimiter: str) -> str:
    """The error for a record with more or fewer fields than its header, and the usual cause."""
    fix = (
        f"quote text that contains {'commas' if delimiter == ',' else 'tabs'}"
        if found > header
        else "fill in the missing fields, and quote text that contains line breaks"
    )
    fields = "field" if found == 1 else "fields"
    return f"{record.where(path)} has {found} {fields}, the header has {header}: {fix}"


def table_records(
    path: Path, text: str, delimiter: str, *, strict: bool = True, skip: int = 0
) -> tuple[list[str], Iterator[TableRecord]]:
    """The header row of a delimited text, and its records as they are read (after `skip`
    more header rows). Lines with nothing but spaces on them are skipped; a record with more or
    fewer fields than the header is an error naming its lines, since its columns would shift.

    Errors name the line a record starts on (a quoted field may run over several lines)."""
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, strict=strict)
    try:
        header = next(reader, [])
        for _ in range(skip):
            next(reader, None)
    except csv.Error as error:
        raise _csv_error(path, reader.line_num + 1, error) from None
    return header, _records(reader, header, path, delimiter)


def _records(reader: Any, header: list[str], path: Path, delimiter: str) -> Iterator[TableRecord]:
    """The records after the header, numbered by the lines they span."""
    ended = reader.line_num  # the last line of the record read before
    try:
        for values in reader:
            record = TableRecord(
                ended + 1, reader.line_num, dict(zip(header, values, strict=False))
            )
            ended = record.last
            if len(values) <= 1 and not "".join(values).strip():
                continue
            if len(values) != len(header):
                raise DataError(_field_count(record, path, len(values), len(header), delimiter))
            yield record
    except csv.Error as error:
        raise _csv_error(path, ended + 1, error) from None


def read_table(path: Path, delimiter: str, columns: Columns) -> list[RawRow]:
    """Read a CSV or TSV file with a header row; blank lines are skipped, and records with a
    blank text dropped (see `keep_row`)."""
    header, records = table_records(path, decode_utf8(read_bytes(path), path), delimiter)
    if not header:
        raise no_rows(path)
    _check_columns(header, columns, str(path))
    _refuse_repeated(header, columns, str(path))
    rows = []
    for record in records:
        where, fields = record.where(path), record.fields
        text, label = fields[columns.text], fields[columns.label].strip()
        if not keep_row(text, label, where, columns.label != columns.text):
            continue
        rows.append(
            RawRow(
                text=text,
                label=label,
                where=where,
                origin=Origin(path.name, record.first),
                text_pair=None if columns.text_pair is None else fields[columns.text_pair],
                time=None if columns.time is None else fields[columns.time],
            )
        )
    if not rows:
        raise no_rows(path)
    return rows


def _json_scalar(value: object, where: str) -> str:
    """A JSON label value as text: strings stay (stripped), numbers and booleans print as JSON."""
    if isinstance(value, str):
        return value.strip()
    if value is None or isinstance(value, dict | list):
        raise DataError(f"{where} has no usable label ({value!r}); give a string, number or list")
    return json.dumps(value)


def _json_label(value: object, where: str) -> str | tuple[str, ...]:
    """A JSON label as text, or a tuple of texts for a list (label set or word tags)."""
    if isinstance(value, list):
        return tuple(_json_scalar(item, where) for item in value)
    return _json_scalar(value, where)


def _json_text(value: object, where: str) -> str | tuple[str, ...] | None:
    """A JSON text: a string, or a list of words for token tasks."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(word, str) for word in value):
        return tuple(value)
    raise DataError(f"{where}: text must be a string or a list of words, not {value!r}")


def row_from_record(
    record: Mapping[str, object], columns: Columns, where: str, origin: Origin
) -> RawRow | None:
    """Turn one JSON-like record into a raw row, or None when its text is blank (`keep_row`)."""
    _check_columns(list(record), columns, where)
    text = _json_text(record[columns.text], where)
    if text is None or not keep_row(
        text, record[columns.label], where, columns.label != columns.text
    ):
        return None
    pair = None
    if columns.text_pair is not None:
        value = record[columns.text_pair]
        pair = "" if value is None else str(value)
    time = None
    if columns.time is not None:
        time = "" if record[columns.time] is None else str(record[columns.time])
    return RawRow(text, _json_label(record[columns.label], where), where, origin, pair, time)


def json_line(line: str, where: str) -> tuple[dict[str, Any], list[str]]:
    """The JSON object on one line (`where` names it in errors), and every key it names,
    repeats included (a JSON parser keeps the last of a repeated key silently); anything
    else is one line."""
    objects: list[list[tuple[str, Any]]] = []

    def keep(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        objects.append(pairs)
        return dict(pairs)

    try:
        value = json.loads(line, object_pairs_hook=keep)
    except json.JSONDecodeError as error:
        raise DataError(f"{where} is not valid JSON ({error.msg}); fix that line") from None
    except ValueError:  # an integer past Python's digit limit
        raise DataError(f"{where} holds a number too long to read; fix that line") from None
    except RecursionError:
        raise DataError(f"{where} nests too deeply to read; fix that line") from None
    if not isinstance(value, dict):
        raise DataError(f"{where} is not a JSON object; write one {{...}} per line")
    return value, [key for key, _ in objects[-1]]  # inner objects are parsed first


def jsonl_objects(path: Path, text: str) -> Iterator[tuple[int, str, dict[str, Any], list[str]]]:
    """Each non-blank line's JSON object (`text` is `path`'s) with its line number, `where` (the
    file and line, for errors) and its keys; a key named twice is one line. Only newlines end
    a record (a JSON string may hold U+2028 and other separators that str.splitlines cuts at)."""
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        where = f"{path} line {number}"
        record, keys = json_line(line, where)
        if len(set(keys)) < len(keys):
            twice = next(key for index, key in enumerate(keys) if key in keys[:index])
            raise DataError(
                f"{where} names '{twice}' more than once; keep one so it is clear which to read"
            )
        yield number, where, record, keys


def read_jsonl(path: Path, columns: Columns) -> list[RawRow]:
    """Read one JSON object per line; blank lines and rows with blank text are skipped."""
    rows = []
    for number, line in enumerate(decode_utf8(read_bytes(path), path).splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path} line {number}"
        record, keys = json_line(line, where)
        _refuse_repeated(keys, columns, where)
        row = row_from_record(record, columns, where, Origin(path.name, number))
        if row is not None:
            rows.append(row)
    if not rows:
        raise no_rows(path)
    return rows


def _valid_tag(tag: str) -> bool:
    """Whether a tag is BIO: O, B-TYPE or I-TYPE."""
    return tag == "O" or (tag[:2] in ("B-", "I-") and len(tag) > 2)


def read_bio(path: Path) -> list[RawRow]:
    """Read one 'WORD ... TAG' token a line, sentences separated by blank lines; every token
    line has as many columns as the first (a word with a space in it would shift them)."""
    rows: list[RawRow] = []
    words: list[str] = []
    tags: list[str] = []
    start = 1
    first: tuple[int, int] | None = None  # the first token line and its number of columns
    lines = decode_utf8(read_bytes(path), path).splitlines()
    for number, line in enumerate([*lines, ""], start=1):
        fields = line.split()
        if not fields or fields[0] == "-DOCSTART-":
            if words:
                where = f"{path} line {start}"
                rows.append(RawRow(tuple(words), tuple(tags), where, Origin(path.name, start)))
            words, tags, start = [], [], number + 1
            continue
        if len(fields) < 2 or not _valid_tag(fields[-1]):
            raise DataError(
                f"{path} line {number}: expected a word and a BIO tag (O, B-TYPE, I-TYPE) "
                f"separated by whitespace, got {line.strip()!r}"
            )
        first = first or (number, len(fields))
        if len(fields) != first[1]:
            raise DataError(
                f"{path} line {number} has {len(fields)} columns, line {first[0]} has "
                f"{first[1]}: a word cannot contain spaces; give every token line the same "
                "columns (WORD ... TAG)"
            )
        words.append(fields[0])
        tags.append(fields[-1])
    if not rows:
        raise no_rows(path)
    return rows
