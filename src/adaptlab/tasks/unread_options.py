"""The one rule for options that do not apply: an option the chosen task, adapter, sequence
objective or command does not read is refused in one line naming it, those it is for and what
this one is ("--chat-template is for chat adapters; this one is an sft adapter"), never
ignored. What reads which option is declared where each plug-in registers (a task's or a
sequence objective's `data_options`); this module only compares and words."""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping
from typing import TYPE_CHECKING

from adaptlab.errors import ConfigError
from adaptlab.tasks.registry import TASKS

if TYPE_CHECKING:
    from adaptlab.tasks.task import Task

NAMING_OPTION = "task"
"""The option that names the task itself: always read."""


def flag(option: str) -> str:
    """An option as the command line spells it: chat_template -> --chat-template."""
    return "--" + option.replace("_", "-")


def described(name: str, kind: str) -> str:
    """What one reader is, for a refusal: `an sft adapter`, `a chat run`."""
    return f"{_article(name)} {name} {kind}"


def refuse_unread(
    given: Iterable[str],
    reads: Collection[str],
    readers: Mapping[str, Collection[str]],
    kind: str,
    this: str,
) -> None:
    """Refuse, in one line, the first option of `given` (as data options name them) not in
    `reads` (what this one reads), naming the readers of its `kind` (run, adapter, sequence)
    that read it (`readers`: what each reads, by name) and `this` (what this one is)."""
    for option in given:
        if option == NAMING_OPTION or option in reads:
            continue
        takers = [name for name, read in readers.items() if option in read]
        if not takers:
            raise ConfigError(f"{flag(option)} does not apply to {this}; drop it")
        raise ConfigError(f"{flag(option)} is for {_joined(takers)} {kind}s; this one is {this}")


def refuse_unread_by_task(
    given: Iterable[str], task: Task, kind: str, *, this: str | None = None
) -> None:
    """`refuse_unread` of the data options `task` declares, naming the other tasks that read
    one it does not; `this` defaults to `task`'s name and `kind`."""
    readers = {each.name: each.data_options for each in TASKS}
    refuse_unread(given, task.data_options, readers, kind, this or described(task.name, kind))


def _joined(names: list[str]) -> str:
    """`a`, `a and b`, `a, b and c`."""
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def _article(name: str) -> str:
    """'an' before a name said with a vowel first (mlm and sft are spelt out), else 'a'."""
    word = re.split(r"[-_\d]", name.lower())[0]
    spelt = not set(word) & set("aeiouy")
    return "an" if word[:1] in set("aeiou") or (spelt and word[:1] in set("fhlmnrsx")) else "a"
