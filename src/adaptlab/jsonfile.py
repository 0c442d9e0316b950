"""JSON from files a user gives (manifests, PEFT configs, a model folder's config), parsed with a
bound on nesting.

Python's parser recurses once per nested list or object, so a file of 100,000 `[` ends in a
RecursionError, and anything that walks a result nested just under the limit may hit it later.
No file adaptlab reads nests more than a few levels, so the depth is measured first, without
recursion, and a deeper file is refused before it is parsed.
"""

from __future__ import annotations

import json
import re
from itertools import accumulate
from typing import Any

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
