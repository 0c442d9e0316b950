"""An answer as exact match compares it (SQuAD v1.1's `normalize_answer`): lower case, no ASCII
punctuation (`string.punctuation`), no articles, single spaces. Below the tasks, so the data
that builds pairs from answers and the metrics that score them compare alike."""

from __future__ import annotations

import re
import string

_PUNCTUATION = frozenset(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalize_answer(text: str) -> str:
    """`text` lower-cased, without punctuation or articles, its words single-spaced."""
    lowered = text.lower()
    unpunctuated = "".join(char for char in lowered if char not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", unpunctuated).split())
