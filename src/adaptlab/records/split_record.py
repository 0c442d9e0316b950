"""Which source rows a run trained on, picked its best epoch on and tested on: the run folder's
`splits.json`, so that its splits can be checked against the data.

Per split, per source file, the rows in the order the run used them: the line each example's
record starts on (1 = the file's first line, a header included; for an hf: source, the row's
position in its split). A built-in corpus names the file inside its data package. For a data
file or folder, `digest` is the SHA-256 of its contents (`adaptlab.data.identity`), so a row
number is known to name the record it named when the run read it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from adaptlab.data.identity import content_digest
from adaptlab.data.types import SPLIT_NAMES, Origin
from adaptlab.errors import ConfigError
from adaptlab.records.jsonfields import JsonObject

SPLITS_FILE = "splits.json"
"""The file of a run folder that holds its split record."""


@dataclass(frozen=True)
class SplitRecord:
    """The data source as the spec gives it, its contents' hash (None for built-in and hf:
    sources), and per split the rows of each source file, in the order the run used them."""

    data: str
    digest: str | None
    splits: Mapping[str, Mapping[str, tuple[int, ...]]]

    @classmethod
    def of(cls, data: str, origins: Mapping[str, Sequence[Origin | None]] | None) -> SplitRecord:
        """The record of a run on `data` whose splits hold examples from `origins`; every
        example must have one (data sets and corpora loaded by `adaptlab.data` do)."""
        if origins is None:
            raise ValueError(f"the splits of {data} kept no origins to record")
        splits: dict[str, dict[str, tuple[int, ...]]] = {}
        for split in SPLIT_NAMES:
            rows: dict[str, list[int]] = {}
            for position, origin in enumerate(origins[split]):
                if origin is None:
                    raise ValueError(f"example {position} of the {split} split has no origin")
                rows.setdefault(origin.file, []).append(origin.row)
            splits[split] = {file: tuple(found) for file, found in rows.items()}
        return cls(data, content_digest(data), splits)

    def to_dict(self) -> dict[str, Any]:
        return {
            "data": self.data,
            "digest": self.digest,
            "splits": {
                split: {file: list(rows) for file, rows in files.items()}
                for split, files in self.splits.items()
            },
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], where: str = "split record") -> SplitRecord:
        """The record `to_dict` wrote; ConfigError naming the first bad field."""
        record = JsonObject(data, where)
        record.refuse_unknown(("data", "digest", "splits"))
        digest = record.data.get("digest")
        if digest is not None and not isinstance(digest, str):
            raise ConfigError(f"{where}: digest: expected a string or null, got {digest!r}")
        found = record.object("splits")
        found.refuse_unknown(SPLIT_NAMES)
        return cls(
            data=record.text("data"),
            digest=digest,
            splits={
                split: _rows(found.mapping(split), f"{where}: splits.{split}")
                for split in SPLIT_NAMES
            },
        )


def _rows(files: Mapping[str, Any], where: str) -> dict[str, tuple[int, ...]]:
    """Each file's row numbers, checked to be whole numbers."""
    for file, rows in files.items():
        if not isinstance(rows, list) or not all(
            isinstance(row, int) and not isinstance(row, bool) for row in rows
        ):
            raise ConfigError(f"{where}.{file}: expected a list of row numbers")
    return {str(file): tuple(rows) for file, rows in files.items()}


def read_split_record(path: str | os.PathLike[str]) -> SplitRecord:
    """The split record of a run folder (or the `splits.json` file itself)."""
    path = Path(path)
    if path.is_dir():
        path = path / SPLITS_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ConfigError(f"cannot read split record {path}: {error}") from None
    return SplitRecord.from_dict(data, where=str(path))
