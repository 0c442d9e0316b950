"""One input's prediction, as `adaptlab predict` and the server give it."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass
class Prediction:
    """One input's prediction; `words` is set for word-level tasks (one tag per word), `score`
    for a reward model (its scalar score, with no label)."""

    text: str
    label: Any
    probability: float | list[float] | None
    words: list[str] | None = None
    score: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (`adaptlab predict --jsonl`, the server): fields that are set."""
        return {k: v for k, v in asdict(self).items() if v is not None}
