"""Preference-family examples from one JSONL, CSV or TSV file, in TRL's formats, each with where
it came from; a bad row is one line naming the file and the line.

- `preference` (DPO and its kin, reward models): `prompt`, `chosen`, `rejected` as texts; or,
  in JSONL, conversational: `prompt` a list of {role, content} messages ending with the user's,
  `chosen` and `rejected` lists holding the assistant's answer (one message each); or TRL's
  implicit prompt: no `prompt`, `chosen` and `rejected` whole conversations that share every
  turn but the last, the assistant's answer (the shared turns are the prompt).
- `unpaired` (KTO): `prompt`, `completion` and `label`, a JSON bool (`true` / `false` in CSV
  and TSV; true: the completion is desirable); in JSONL the prompt may be messages and the
  completion a list holding one assistant message.
- `prompt-only` (GRPO): `prompt`, text or messages, and a reference `answer` when the file's
  header or first record has that column (then every row needs one).

Whether a JSONL file's rows are texts or conversations is decided by its first record (TRL
reads a dataset one way); every other row must be written alike. CSV and TSV hold texts.
Columns not read are ignored. Texts are kept as written; a prompt or answer with nothing but
spaces in it is an error, not a row to skip, and so is a pair whose answers are equal (spaces
at their ends aside).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path

from adaptlab.checks import shown
from adaptlab.data import record_files
from adaptlab.data.generative import Turn, check_conversation
from adaptlab.data.generative_rows import _turn, _unicode
from adaptlab.data.preference import (
    Judged,
    Preference,
    PreferenceExample,
    Prompt,
    Question,
)
from adaptlab.data.readers import decode_utf8, no_rows, read_bytes
from adaptlab.data.types import Origin
from adaptlab.errors import DataError

Located = list[tuple[PreferenceExample, Origin]]
"""Examples with the file and line each starts on."""
RowReader = record_files.RecordReader[PreferenceExample]

TEXT, CONVERSATION, IMPLICIT = "text", "conversation", "implicit prompt"
"""How a file writes its prompts: texts, messages, or (pairs only) inside chosen / rejected."""


@dataclass(frozen=True)
class PreferenceColumns:
    """Which columns hold each part of a row; a shape reads only its own (`READ`)."""

    prompt: str = "prompt"
    chosen: str = "chosen"
    rejected: str = "rejected"
    completion: str = "completion"
    label: str = "label"
    answer: str = "answer"

    def read(self, shape: str) -> dict[str, str]:
        """The columns `shape` reads, by the option (`chosen_column`, ...) naming each."""
        return {f"{part}_column": getattr(self, part) for part in READ[shape]}

    def changed(self) -> list[str]:
        """The options (`label_column`, ...) set to other than their default."""
        default = PreferenceColumns()
        return [
            f"{field.name}_column"
            for field in fields(self)
            if getattr(self, field.name) != getattr(default, field.name)
        ]


READ: dict[str, tuple[str, ...]] = {
    "preference": ("prompt", "chosen", "rejected"),
    "unpaired": ("prompt", "completion", "label"),
    "prompt-only": ("prompt", "answer"),
}
"""The parts of a row each shape reads (the answer of a prompt-only row is optional), by
`PREFERENCE_SHAPES`."""


def read_preferences(path: Path, shape: str, columns: PreferenceColumns) -> Located:
    """The examples of one data file, read as `shape` (see the module docstring)."""
    suffix = record_files.checked_suffix(path)
    text = decode_utf8(read_bytes(path), path)
    if suffix == ".jsonl":
        located = record_files.jsonl_examples(
            path,
            text,
            lambda number, where, record, keys: _row_reader(
                shape, keys, _form(shape, record, columns), columns, where, first=f"line {number}"
            ),
        )
    else:
        located = record_files.table_examples(
            path,
            text,
            lambda header: _row_reader(shape, header, TEXT, columns, str(path), first="header"),
        )
    if not located:
        raise no_rows(path)
    return located


def _form(shape: str, first: Mapping[str, object], columns: PreferenceColumns) -> str:
    """How a JSONL file writes its prompts, read off its first record: a list of messages
    under the prompt column is a conversation; pairs without a prompt column whose chosen
    answer is a list are TRL's implicit prompt."""
    if columns.prompt in first:
        return CONVERSATION if isinstance(first[columns.prompt], list) else TEXT
    if shape == "preference" and isinstance(first.get(columns.chosen), list):
        return IMPLICIT
    return TEXT


FIXES = {
    "prompt_column": "set prompt_column to one of them",
    "chosen_column": "set chosen_column to one of them",
    "rejected_column": "set rejected_column to one of them",
    "completion_column": "set completion_column to one of them",
    "label_column": "set label_column to one of them",
    "answer_column": "set answer_column to one of them, or leave it unset to read no answers",
}
"""What to do about a missing column, by the option naming it."""
ROW_FIXES = {
    **FIXES,
    "answer_column": "the file's first record has an answer, so every row needs one; add it",
}
"""What to do about a column one row lacks that the file's header or first record has."""


def _row_reader(
    shape: str,
    found: Sequence[str],
    form: str,
    columns: PreferenceColumns,
    where: str,
    *,
    first: str,
) -> RowReader:
    """How every record of a file is read, decided by its header or first record (`where`;
    `first`: which, `header` for a table's)."""
    needed = columns.read(shape)
    if form == IMPLICIT:
        del needed["prompt_column"]
    if columns.prompt not in found and form != IMPLICIT:
        fix = FIXES["prompt_column"]
        if shape == "preference":
            fix += (
                ", or (JSONL) give chosen and rejected as whole conversations sharing every "
                "turn but the answer (TRL's implicit prompt)"
            )
        raise record_files.missing_column(columns.prompt, found, where, fix)
    if shape == "prompt-only" and columns.answer not in found:
        if columns.answer != PreferenceColumns().answer:
            raise record_files.missing_column(columns.answer, found, where, FIXES["answer_column"])
        del needed["answer_column"]
    _check_columns(found, needed, where)
    parts = Parts(form, first, table=first == "header")

    def read(record: Mapping[str, object], where: str) -> PreferenceExample:
        _check_columns(list(record), needed, where, ROW_FIXES)
        if shape == "preference":
            return parts.preference(record, columns, where)
        prompt = parts.prompt(record[columns.prompt], columns.prompt, where)
        if shape == "unpaired":
            answer = parts.answer(record[columns.completion], columns.completion, where)
            return Judged(prompt, answer, parts.label(record[columns.label], columns.label, where))
        if "answer_column" not in needed:
            return Question(prompt)
        return Question(prompt, parts.text(record[columns.answer], columns.answer, where))

    return read


@dataclass(frozen=True)
class Parts:
    """Reads the parts of a file's rows, written as its first record (`first`) writes them:
    prompts as texts or messages (`form`), labels as JSON or as a table's text (`table`)."""

    form: str
    first: str
    table: bool

    def preference(
        self, record: Mapping[str, object], columns: PreferenceColumns, where: str
    ) -> Preference:
        """A pair: its prompt (given or implicit) and two different answers."""
        chosen_column, rejected_column = columns.chosen, columns.rejected
        if self.form == IMPLICIT:
            prompt: Prompt
            prompt, chosen, rejected = _implicit(
                record[chosen_column], record[rejected_column], columns, where
            )
        else:
            prompt = self.prompt(record[columns.prompt], columns.prompt, where)
            chosen = self.answer(record[chosen_column], chosen_column, where)
            rejected = self.answer(record[rejected_column], rejected_column, where)
        if chosen.strip() == rejected.strip():
            raise DataError(
                f"{where}: '{chosen_column}' and '{rejected_column}' are the same answer; a "
                "pair needs two different answers: fix or delete that row"
            )
        return Preference(prompt, chosen, rejected)

    def prompt(self, value: object, column: str, where: str) -> Prompt:
        """A prompt: a text with more than spaces in it, or checked messages."""
        if self.form == TEXT:
            return self.text(self._alike(value, column, where), column, where)
        messages = self._messages(value, column, where)
        return _prompt_turns(_turns(messages, column, where), f"'{column}'", where)

    def answer(self, value: object, column: str, where: str) -> str:
        """An answer: a text, or (conversations) a list holding one assistant message."""
        if self.form == TEXT:
            return self.text(self._alike(value, column, where), column, where)
        return _assistant_answer(self._messages(value, column, where), column, where)

    def text(self, value: object, column: str, where: str) -> str:
        """A string with more than spaces in it."""
        if not isinstance(value, str):
            raise DataError(f"{where}: '{column}' is {shown(value)}, not a string; give text")
        if not value.strip():
            raise DataError(f"{where} has an empty '{column}'; write it or delete that row")
        return _unicode(value, f"'{column}'", where)

    def label(self, value: object, column: str, where: str) -> bool:
        """KTO's label: a JSON bool, or `true` / `false` (any case) in a table."""
        if self.table and isinstance(value, str) and value.strip().lower() in ("true", "false"):
            return value.strip().lower() == "true"
        if not self.table and isinstance(value, bool):
            return value
        written = "true or false" if self.table else "a JSON bool (true or false, unquoted)"
        raise DataError(
            f"{where}: '{column}' is {shown(value)}, not {written}; true marks a desirable "
            "completion, false an undesirable one"
        )

    def _alike(self, value: object, column: str, where: str) -> object:
        """`value`, unless it is messages in a file of texts."""
        if isinstance(value, list):
            raise self._unlike(column, "a list", "texts", where)
        return value

    def _messages(self, value: object, column: str, where: str) -> list[object]:
        """`value` as a list of messages; a text is refused as unlike the file's first row."""
        if isinstance(value, str):
            raise self._unlike(column, "a string", "messages", where)
        if not isinstance(value, list):
            raise DataError(
                f"{where}: '{column}' is {shown(value)}, not a list of {{role, content}} messages"
            )
        return value

    def _unlike(self, column: str, written: str, held: str, where: str) -> DataError:
        """The error for a row that writes `column` unlike the file's first record."""
        return DataError(
            f"{where}: '{column}' is {written}, but this file's rows hold {held} (as its first "
            f"record, {self.first}, does); write every row alike"
        )


def _turns(value: Sequence[object], column: str, where: str) -> tuple[Turn, ...]:
    """A list of {role, content} objects as turns (each checked as a chat's message is)."""
    return tuple(
        _turn(message, number, f"{where} ('{column}')") for number, message in enumerate(value, 1)
    )


def _prompt_turns(turns: tuple[Turn, ...], what: str, where: str) -> tuple[Turn, ...]:
    """A conversational prompt (`what` names it): an optional system message, then user and
    assistant messages alternating from the user's, ending with the user's message the
    answer replies to."""
    if not turns:
        raise DataError(
            f"{where}: {what} is an empty list; give the messages up to the user's message "
            "the answer replies to"
        )
    last = turns[-1]
    if last.role != "user":
        raise DataError(
            f"{where}: the last message of {what} ({len(turns)}) is {last.role}; a prompt "
            "ends with the user's message the answer replies to"
        )
    check_conversation((*turns, Turn("assistant", "answer")), f"{where} ({what})")
    if not last.content.strip():
        raise DataError(
            f"{where}: the last message of {what} (user) is empty; write it or delete that row"
        )
    return turns


def _assistant_answer(value: Sequence[object], column: str, where: str) -> str:
    """A conversational answer: a list holding one assistant message with text in it."""
    turns = _turns(value, column, where)
    if len(turns) != 1:
        raise DataError(
            f"{where}: '{column}' holds {len(turns)} messages; a conversational answer is a "
            "list of one assistant message"
        )
    return _last_answer(turns, column, where)


def _last_answer(turns: Sequence[Turn], column: str, where: str) -> str:
    """The text of the assistant's message that ends `turns`."""
    last = turns[-1]
    if last.role != "assistant":
        raise DataError(
            f"{where}: the last message of '{column}' is {last.role}, not the assistant's "
            "answer; end it with the assistant's message"
        )
    if not last.content.strip():
        raise DataError(
            f"{where}: the answer in '{column}' (assistant) is empty; write it or delete that row"
        )
    return last.content


def _implicit(
    chosen: object, rejected: object, columns: PreferenceColumns, where: str
) -> tuple[Prompt, str, str]:
    """TRL's implicit prompt: two conversations that share every turn but their last, the
    assistant's answer; the shared turns are the prompt."""
    read: list[tuple[Turn, ...]] = []
    for column, value in ((columns.chosen, chosen), (columns.rejected, rejected)):
        if not isinstance(value, list):
            raise DataError(
                f"{where}: '{column}' is {shown(value)}, not a list of messages; without a "
                f"'{columns.prompt}' column chosen and rejected are whole conversations"
            )
        turns = _turns(value, column, where)
        if len(turns) < 2:
            raise DataError(
                f"{where}: '{column}' holds {len(turns)} message(s), so no prompt is shared; "
                f"give the user's message before the answer, or a '{columns.prompt}' column"
            )
        _last_answer(turns, column, where)
        read.append(turns)
    kept, dropped = read
    if kept[:-1] != dropped[:-1]:
        differ = next(
            (n for n, (a, b) in enumerate(zip(kept, dropped, strict=False), 1) if a != b),
            min(len(kept), len(dropped)),
        )
        raise DataError(
            f"{where}: '{columns.chosen}' and '{columns.rejected}' differ at message {differ}, "
            "before their answers; with an implicit prompt they share every turn but the "
            "assistant's last"
        )
    shared = f"the prompt '{columns.chosen}' and '{columns.rejected}' share"
    prompt = _prompt_turns(kept[:-1], shared, where)
    return prompt, kept[-1].content, dropped[-1].content


def _check_columns(
    found: Sequence[str],
    options: Mapping[str, str],
    where: str,
    fixes: Mapping[str, str] = FIXES,
) -> None:
    """`check_columns` of `options` (option: column), with what `fixes` says to do."""
    wanted = [(name, fixes[option]) for option, name in options.items()]
    record_files.check_columns(found, wanted, where)
