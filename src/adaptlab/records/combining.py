"""How a run that trains nothing makes the adapter it scores: trained adapters combined
(`adaptlab.combine_adapters`), one source per data set, and the head it scores with.

A study's `combine:` entry plans one such run per data set of a cell: it combines the adapters
one method trained on every data set of the study, each source named after its data set (so
the combined folder keeps each source's head by that name), and scores the run's own data set
with its own data set's head. Causal-LM sources (generative data) share the base's LM head:
their recipe names no head. The options are those of `adaptlab.combine_adapters`, checked
there (and when the study spec is read); this record is torch-free.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from adaptlab.errors import ConfigError
from adaptlab.records.jsonfields import JsonObject

LINEAR_ARITHMETIC = "updates"
"""What a `linear` recipe records beside its how: the weighted sum of the sources' updates. A
`linear` recipe stored without it was computed with PEFT's factor-wise arithmetic (now
`peft_linear`), so its run id differs and a resumed study combines it again."""


@dataclass(frozen=True)
class SourceFolder:
    """One adapter a combination is made from: the name its head is kept under, its adapter
    (or run) folder and its weight."""

    name: str
    folder: str
    weight: float

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "folder": self.folder, "weight": self.weight}

    @classmethod
    def from_json(cls, source: JsonObject) -> SourceFolder:
        source.refuse_unknown(("name", "folder", "weight"))
        return cls(source.text("name"), source.text("folder"), source.number("weight"))


@dataclass(frozen=True)
class CombineRecipe:
    """The sources, `how` and its options (`density`, `rank`, `majority_sign`, `seed`, as
    `adaptlab.combine_adapters` takes them) and `head`: the source whose head scores the run
    where the sources keep their own heads (None: they share one, as causal LMs do)."""

    how: str
    sources: tuple[SourceFolder, ...]
    head: str | None
    density: float | None = None
    rank: int | None = None
    majority_sign: str = "total"
    seed: int = 0

    def __post_init__(self) -> None:
        sources = self.sources
        if (
            not isinstance(sources, tuple)
            or not sources
            or not all(isinstance(s, SourceFolder) for s in sources)
        ):
            raise ConfigError(f"a combination needs CombinedSources, got {sources!r}")
        names = [source.name for source in sources]
        if self.head is not None and self.head not in names:
            raise ConfigError(
                f"a combination scores with the head of one of its sources ({', '.join(names)}), "
                f"got {self.head!r}"
            )

    @property
    def options(self) -> dict[str, Any]:
        """The keywords of `adaptlab.combine_adapters` besides the folders."""
        return {
            "how": self.how,
            "weights": [source.weight for source in self.sources],
            "names": [source.name for source in self.sources],
            "density": self.density,
            "rank": self.rank,
            "majority_sign": self.majority_sign,
            "seed": self.seed,
        }

    def to_dict(self) -> dict[str, Any]:
        written: dict[str, Any] = {"how": self.how}
        if self.how == "linear":
            written["arithmetic"] = LINEAR_ARITHMETIC
        return written | {
            "sources": [source.to_dict() for source in self.sources],
            "head": self.head,
            "density": self.density,
            "rank": self.rank,
            "majority_sign": self.majority_sign,
            "seed": self.seed,
        }

    @classmethod
    def from_json(cls, recipe: JsonObject) -> CombineRecipe:
        recipe.refuse_unknown(
            ("how", "arithmetic", "sources", "head", "density", "rank", "majority_sign", "seed")
        )
        arithmetic = recipe.optional_text("arithmetic")
        if arithmetic not in (None, LINEAR_ARITHMETIC):
            raise ConfigError(
                f"a combination's arithmetic must be {LINEAR_ARITHMETIC!r}, got {arithmetic!r}"
            )
        return cls(
            how=recipe.text("how"),
            sources=tuple(SourceFolder.from_json(s) for s in recipe.objects("sources")),
            head=recipe.optional_text("head"),
            density=recipe.optional_number("density"),
            rank=recipe.optional_integer("rank"),
            majority_sign=recipe.text("majority_sign", default="total"),
            seed=recipe.integer("seed", default=0),
        )

    def placed(self, folder: Callable[[str], str]) -> CombineRecipe:
        """The recipe with each source's folder replaced by `folder(it)`."""
        sources = tuple(replace(source, folder=folder(source.folder)) for source in self.sources)
        return replace(self, sources=sources)
