"""A generated answer as a result keeps it: the prompt, what the model generated and the
reference it was scored against (a sample of a generative run's test, for the report)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from adaptlab.records.jsonfields import JsonObject

SAMPLE_SIZE = 8
"""Test generations a result keeps (the first, in test order)."""


@dataclass(frozen=True)
class Generated:
    """One prompt's generation and its reference."""

    prompt: str
    generation: str
    reference: str

    def to_dict(self) -> dict[str, Any]:
        return {"prompt": self.prompt, "generation": self.generation, "reference": self.reference}

    @classmethod
    def from_json(cls, row: JsonObject) -> Generated:
        row.refuse_unknown(("prompt", "generation", "reference"))
        return cls(row.text("prompt"), row.text("generation"), row.text("reference"))
