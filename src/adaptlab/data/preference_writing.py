"""Pairs written as TRL's preference format reads them (`adaptlab.data.preference_rows`): a text
prompt with text answers, or a conversation's messages with each answer one assistant message."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from adaptlab.data.generative import Turn
from adaptlab.data.preference import Preference
from adaptlab.fileio import atomic_write


def messages_of(turns: Sequence[Turn]) -> list[dict[str, str]]:
    """Turns as chat messages (`role`, `content`)."""
    return [{"role": turn.role, "content": turn.content} for turn in turns]


def preference_record(pair: Preference) -> dict[str, Any]:
    """One pair as a JSON object of the preference format (`prompt`, `chosen`, `rejected`)."""
    if isinstance(pair.prompt, str):
        return {"prompt": pair.prompt, "chosen": pair.chosen, "rejected": pair.rejected}
    answers = {
        side: [{"role": "assistant", "content": text}]
        for side, text in (("chosen", pair.chosen), ("rejected", pair.rejected))
    }
    return {"prompt": messages_of(pair.prompt), **answers}


def write_preferences(path: Path, pairs: Sequence[Preference]) -> None:
    """`pairs` as a JSON Lines file at `path` (its folder made if need be), one pair a line,
    written whole or not at all."""
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "".join(json.dumps(preference_record(pair)) + "\n" for pair in pairs)
    atomic_write(path, text.encode())
