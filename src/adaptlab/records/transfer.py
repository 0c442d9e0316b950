"""Zero-shot transfer records: a data set a run is also tested on, and the score it got there.

A run trained on one corpus (English tweets, say) is tested, with no training on it, on the
test split of another whose labels have the same names (Slovenian comments), its labels
matched by name. A stacked run (MAD-X) can run another adapter in place of a stacked one for
that test: the target language's adapter in place of the source language's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from adaptlab.errors import ConfigError
from adaptlab.records.jsonfields import JsonObject
from adaptlab.records.metric_ranges import metric_range

Swap = tuple[str, str]
"""(name of an adapter in the running Stack, folder of the adapter to run in its place)."""


@dataclass(frozen=True)
class ZeroShotTarget:
    """A data set whose test split a run is scored on after training, and the stack swaps
    to make for it."""

    data: str
    data_options: Mapping[str, Any] = field(default_factory=dict)
    stack_swap: tuple[Swap, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.data, str) or not self.data:
            raise ConfigError(f"a zero-shot target needs a data set, got {self.data!r}")
        pairs = self.stack_swap
        if not isinstance(pairs, tuple) or not all(
            isinstance(p, tuple) and len(p) == 2 and all(isinstance(s, str) and s for s in p)
            for p in pairs
        ):
            raise ConfigError(f"stack_swap must be (adapter, folder) pairs, got {pairs!r}")

    def to_dict(self) -> dict[str, Any]:
        return {
            "data": self.data,
            "data_options": dict(self.data_options),
            "stack_swap": [{"adapter": a, "folder": f} for a, f in self.stack_swap],
        }

    @classmethod
    def from_json(cls, target: JsonObject) -> ZeroShotTarget:
        target.refuse_unknown(("data", "data_options", "stack_swap"))
        swaps = target.objects("stack_swap", default=[])
        for swap in swaps:
            swap.refuse_unknown(("adapter", "folder"))
        return cls(
            data=target.text("data"),
            data_options=dict(target.mapping("data_options", default={})),
            stack_swap=tuple((swap.text("adapter"), swap.text("folder")) for swap in swaps),
        )


@dataclass(frozen=True)
class ZeroShotScore:
    """How a trained run did on a zero-shot target's test split."""

    data: str
    """The target as the spec gives it."""
    name: str
    """The data set's own name."""
    examples: int
    loss: float
    metrics: Mapping[str, float]
    composition: str | None = None
    """What ran when it was scored, for a run with adapters swapped (Stack('lang-sl', ...))."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "data": self.data,
            "name": self.name,
            "examples": self.examples,
            "loss": self.loss,
            "metrics": dict(self.metrics),
            "composition": self.composition,
        }

    @classmethod
    def from_json(cls, score: JsonObject) -> ZeroShotScore:
        score.refuse_unknown(("data", "name", "examples", "loss", "metrics", "composition"))
        composition = None if score.data.get("composition") is None else score.text("composition")
        return cls(
            data=score.text("data"),
            name=score.text("name"),
            examples=score.integer("examples", least=0),
            loss=score.number("loss"),
            metrics=score.numbers("metrics", within=metric_range, diverged=True),
            composition=composition,
        )
