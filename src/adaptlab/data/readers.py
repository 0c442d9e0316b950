"""Parse CSV/TSV, JSONL and BIO files into raw rows, with line-numbered errors."""

import csv
import io
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from adaptlab.errors import DataError


@dataclass(frozen=True)
class Columns:
    """Which fields of a record hold the text, the optional second text and the label."""

    text: str = "text"
    label: str = "label"
    text_pair: str | None = None


@dataclass(frozen=True)
class RawRow:
    """A record as read, before its label is parsed; `where` locates it in error messages."""

    text: str | tuple[str, ...]
    label: str | tuple[str, ...]
    where: str
    text_pair: str | None = None


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
    ):
        if name is not None and name not in found:
            listed = ", ".join(found) or "none"
            raise DataError(
                f"column '{name}' not found in {where} (columns found: {listed}); "
                f"set {role} to one of them"
            )


def _refuse_repeated(found: list[str], columns: Columns, where: str) -> None:
    """Fail when a header (or record) names a column that is used (text, pair or label) more
    than once: which of them to read would be a guess."""
    for name in (columns.text, columns.label, columns.text_pair):
        if name is not None and found.count(name) > 1:
            raise DataError(
                f"{where} names column '{name}' more than once; rename or drop the others "
                "so it is clear which to read"
            )


def _is_blank(text: str | tuple[str, ...] | None) -> bool:
    """Whether a text cell holds nothing worth training on."""
    if text is None:
        return True
    if isinstance(text, str):
        return not text.strip()
    return not text


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


def read_table(path: Path, delimiter: str, columns: Columns) -> list[RawRow]:
    """Read a CSV or TSV file with a header row; rows with blank text are dropped.

    Errors name the line a record starts on (a quoted field may run over several lines)."""
    text = decode_utf8(read_bytes(path), path)
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, strict=True)
    ended = 0  # the last line of the record read before
    try:
        header = next(reader, [])
        ended = reader.line_num
        if not header:
            raise no_rows(path)
        _check_columns(header, columns, str(path))
        _refuse_repeated(header, columns, str(path))
        rows = []
        for values in reader:
            first, ended = ended + 1, reader.line_num
            record = dict(zip(header, values, strict=False))
            value = record.get(columns.text)
            if _is_blank(value):
                continue
            pair = None if columns.text_pair is None else record.get(columns.text_pair) or ""
            rows.append(
                RawRow(
                    text=value or "",
                    label=(record.get(columns.label) or "").strip(),
                    where=f"{path} {_lines(first, ended)}",
                    text_pair=pair,
                )
            )
    except csv.Error as error:
        raise _csv_error(path, ended + 1, error) from None
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


def row_from_record(record: Mapping[str, object], columns: Columns, where: str) -> RawRow | None:
    """Turn one JSON-like record into a raw row, or None when its text is blank."""
    _check_columns(list(record), columns, where)
    text = _json_text(record[columns.text], where)
    if text is None or _is_blank(text):
        return None
    pair = None
    if columns.text_pair is not None:
        value = record[columns.text_pair]
        pair = "" if value is None else str(value)
    return RawRow(text, _json_label(record[columns.label], where), where, pair)


def _json_line(line: str) -> tuple[object, list[str]]:
    """One parsed JSON line, and every key its top-level object names, repeats included (a
    JSON parser keeps the last of a repeated key silently)."""
    objects: list[list[tuple[str, Any]]] = []

    def keep(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        objects.append(pairs)
        return dict(pairs)

    value = json.loads(line, object_pairs_hook=keep)
    if not isinstance(value, dict):
        return value, []
    return value, [key for key, _ in objects[-1]]  # inner objects are parsed first


def read_jsonl(path: Path, columns: Columns) -> list[RawRow]:
    """Read one JSON object per line; blank lines and rows with blank text are skipped."""
    rows = []
    for number, line in enumerate(decode_utf8(read_bytes(path), path).splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path} line {number}"
        try:
            record, keys = _json_line(line)
        except json.JSONDecodeError as error:
            raise DataError(f"{where} is not valid JSON ({error.msg}); fix that line") from None
        if not isinstance(record, dict):
            raise DataError(f"{where} is not a JSON object; write one {{...}} per line")
        _refuse_repeated(keys, columns, where)
        row = row_from_record(record, columns, where)
        if row is not None:
            rows.append(row)
    if not rows:
        raise no_rows(path)
    return rows


def _valid_tag(tag: str) -> bool:
    """Whether a tag is BIO: O, B-TYPE or I-TYPE."""
    return tag == "O" or (tag[:2] in ("B-", "I-") and len(tag) > 2)


def read_bio(path: Path) -> list[RawRow]:
    """Read one 'WORD ... TAG' token a line, sentences separated by blank lines."""
    rows: list[RawRow] = []
    words: list[str] = []
    tags: list[str] = []
    start = 1
    lines = decode_utf8(read_bytes(path), path).splitlines()
    for number, line in enumerate([*lines, ""], start=1):
        fields = line.split()
        if not fields or fields[0] == "-DOCSTART-":
            if words:
                rows.append(RawRow(tuple(words), tuple(tags), f"{path} line {start}"))
            words, tags, start = [], [], number + 1
            continue
        if len(fields) < 2 or not _valid_tag(fields[-1]):
            raise DataError(
                f"{path} line {number}: expected a word and a BIO tag (O, B-TYPE, I-TYPE) "
                f"separated by whitespace, got {line.strip()!r}"
            )
        words.append(fields[0])
        tags.append(fields[-1])
    if not rows:
        raise no_rows(path)
    return rows
