"""JSON from files a user gives (manifests, PEFT configs, a model folder's config), parsed with a
bound on nesting, every failure to read one line naming the file.

Python's parser recurses once per nested list or object, so a file of 100,000 `[` ends in a
RecursionError, and anything that walks a result nested just under the limit may hit it later.
No file adaptlab reads nests more than a few levels, so the depth is measured first, without
recursion, and a deeper file is refused before it is parsed.
"""

from __future__ import annotations

import json
import re
from itertools import accumulate
from pathlib import Path
from typing import Any

from adaptlab.errors import AdaptlabError

MAX_NESTING = 100
"""Lists and objects inside each other, at most: manifests and configs nest under ten levels,
tokenizer files under twenty; well below Python's default recursion limit of 1,000."""

_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


def nesting(text: str) -> int:
    """How deep lists and objects nest in JSON `text` (brackets inside strings do not count)."""
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text))
    return max(accumulate(map(_STEP.__getitem__, brackets)), default=0)


def parse_json(text: str) -> Any:
    """`text` as JSON; a one-line ValueError when it is not JSON or nests past MAX_NESTING."""
    depth = nesting(text)
    if depth > MAX_NESTING:
        raise ValueError(f"nested {depth:,} levels deep, more than the {MAX_NESTING} allowed")
    return json.loads(text)


def read_json_file(path: Path, error: type[AdaptlabError]) -> Any:
    """The JSON in the file at `path` (UTF-8, nesting bounded as in `parse_json`); `error`, one
    line naming the file, when it cannot be read or is not JSON."""
    try:
        return parse_json(path.read_text(encoding="utf-8"))
    except OSError as failure:
        raise error(f"{path}: cannot be read ({failure.strerror})") from None
    except ValueError as failure:  # not JSON, not UTF-8, or nested too deep
        raise error(f"{path}: not valid JSON ({failure})") from None
