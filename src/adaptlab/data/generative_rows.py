"""Generative examples from one JSONL, CSV or TSV file, each with where it came from; a bad
row is one line naming the file and the line.

- `prompt-completion`: the prompt and completion columns (names configurable), or, with the
  default names and a file without a prompt column, the Alpaca triple instruction / input /
  output (the prompt is the instruction, then a blank line and the input when the input is
  not blank). Which of the two a file holds is decided by its header (CSV / TSV) or its first
  record (JSONL).
- `messages`: JSONL records whose `messages` is an OpenAI-style list of {role, content}.

Texts are kept as written (spaces included); a completion (or assistant message) with nothing
but spaces in it is an error, not a row to skip.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from adaptlab.checks import shown
from adaptlab.data.generative import (
    ROLES,
    Conversation,
    GenerativeExample,
    PromptCompletion,
    Turn,
    check_conversation,
)
from adaptlab.data.readers import decode_utf8, no_rows, read_bytes
from adaptlab.data.record_files import (
    RecordReader,
    check_columns,
    checked_suffix,
    jsonl_examples,
    missing_column,
    table_examples,
)
from adaptlab.data.types import Origin
from adaptlab.errors import DataError

MESSAGES = "messages"
ALPACA = ("instruction", "input", "output")
DEFAULT_COLUMNS = ("prompt", "completion")

Located = list[tuple[GenerativeExample, Origin]]
"""Examples with the file and line each starts on."""
RowReader = RecordReader[GenerativeExample]


@dataclass(frozen=True)
class PromptColumns:
    """Which columns hold the prompt and the completion."""

    prompt: str = "prompt"
    completion: str = "completion"


def read_generative(path: Path, shape: str, columns: PromptColumns) -> Located:
    """The examples of one data file, read as `shape` (see the module docstring)."""
    suffix = checked_suffix(path)
    if shape == "messages" and suffix != ".jsonl":
        raise DataError(
            f'{path}: chats are read from JSONL files, one {{"messages": [...]}} a line; '
            "convert it to .jsonl"
        )
    text = decode_utf8(read_bytes(path), path)
    if suffix == ".jsonl":
        located = jsonl_examples(
            path, text, lambda line, where, first, keys: _row_reader(shape, keys, columns, where)
        )
    else:
        located = table_examples(
            path, text, lambda header: _row_reader("prompt-completion", header, columns, str(path))
        )
    if not located:
        raise no_rows(path)
    return located


def _row_reader(shape: str, found: Sequence[str], columns: PromptColumns, where: str) -> RowReader:
    """How every record of a file is read, decided by its header or first record's keys."""
    if shape == "messages":
        return _conversation
    chosen = (columns.prompt, columns.completion)
    if columns.prompt not in found and chosen == DEFAULT_COLUMNS:
        if ALPACA[0] in found and ALPACA[2] in found:
            return _alpaca
        raise missing_column(
            "prompt",
            found,
            where,
            "set prompt_column and completion_column, or give the columns instruction, "
            "input, output",
        )
    options = {columns.prompt: "prompt_column", columns.completion: "completion_column"}
    _check_columns(found, options, where)

    def prompt_completion(record: Mapping[str, object], where: str) -> PromptCompletion:
        _check_columns(list(record), options, where)
        prompt = _text(record, columns.prompt, where)
        return PromptCompletion(prompt, _completion(record, columns.completion, where))

    return prompt_completion


def _alpaca(record: Mapping[str, object], where: str) -> PromptCompletion:
    """An instruction / input / output record; the input column may be left out."""
    instruction, extra, output = ALPACA
    _check_columns(list(record), dict.fromkeys((instruction, output), "alpaca"), where)
    prompt = _text(record, instruction, where)
    given = _text(record, extra, where) if extra in record else ""
    if given.strip():
        prompt = f"{prompt}\n\n{given}"
    return PromptCompletion(prompt, _completion(record, output, where))


def _conversation(record: Mapping[str, object], where: str) -> Conversation:
    """A record's `messages` as a checked conversation."""
    _check_columns(list(record), {MESSAGES: "messages"}, where)
    messages = record[MESSAGES]
    if not isinstance(messages, list) or not messages:
        raise DataError(
            f"{where}: 'messages' must be a non-empty list of {{role, content}} objects, got "
            f"{shown(messages)}"
        )
    turns = tuple(_turn(message, number, where) for number, message in enumerate(messages, 1))
    check_conversation(turns, where)
    return Conversation(turns)


def _turn(message: object, number: int, where: str) -> Turn:
    """One {role, content} object; any other key is refused rather than ignored (a `weight` or
    `tool_calls` would change what is trained)."""
    if not isinstance(message, dict):
        raise DataError(
            f"{where}: message {number} is {shown(message)}, not a {{role, content}} object"
        )
    for key in ("role", "content"):
        if key not in message:
            raise DataError(
                f"{where}: message {number} has no '{key}'; give every message a role and a content"
            )
    extra = sorted(set(message) - {"role", "content"})
    if extra:
        raise DataError(
            f"{where}: message {number} has '{extra[0]}', which is not read; keep only role "
            "and content"
        )
    role, content = message["role"], message["content"]
    if not isinstance(role, str) or role not in ROLES:
        raise DataError(
            f"{where}: message {number} has role {shown(role)}; roles are {', '.join(ROLES)}"
        )
    if not isinstance(content, str):
        raise DataError(
            f"{where}: message {number} ({role}) has content {shown(content)}, not a string; "
            "give its text as one string"
        )
    return Turn(role, _unicode(content, f"message {number} ({role})", where))


def _text(record: Mapping[str, object], column: str, where: str) -> str:
    """A column's value, which must be a string."""
    value = record[column]
    if not isinstance(value, str):
        raise DataError(f"{where}: '{column}' is {shown(value)}, not a string; give text")
    return _unicode(value, f"'{column}'", where)


def _unicode(text: str, what: str, where: str) -> str:
    """`text`, refused when it holds an unpaired surrogate (a JSON escape such as \\ud800 that
    no tokenizer takes)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        code = f"\\u{ord(text[error.start]):04x}"
        raise DataError(
            f"{where}: {what} holds an unpaired surrogate ({code}); fix that text"
        ) from None
    return text


def _completion(record: Mapping[str, object], column: str, where: str) -> str:
    """A completion: a string with more than spaces in it."""
    value = _text(record, column, where)
    if not value.strip():
        raise DataError(
            f"{where} has an empty completion ('{column}'); write it or delete that row"
        )
    return value


FIXES = {
    "prompt_column": "set prompt_column to one of them",
    "completion_column": "set completion_column to one of them",
    "alpaca": "give every row an instruction and an output",
    "messages": 'write each chat as {"messages": [...]}',
}
"""What to do about a missing column, by the option (or format) that names it."""


def _check_columns(found: Sequence[str], options: Mapping[str, str], where: str) -> None:
    """`check_columns` of `options` (column: the option naming it)."""
    check_columns(found, [(name, FIXES[option]) for name, option in options.items()], where)
