"""What a ranking found: each candidate's score per estimator, the order (ties grouped) and the
JSON form `adaptlab rank --json` writes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from adaptlab.select.rare import Dropped
from adaptlab.tasks.judging import scores_tie


@dataclass(frozen=True)
class RankRow:
    """One candidate's score per estimator; `key` names the fine-tuned run it corresponds to
    (a model folder name such as `minilm-l6-first3`), None when no run can correspond."""

    name: str
    key: str | None
    scores: dict[str, float]
    layers: dict[str, int | None] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "key": self.key, "scores": self.scores, "layers": self.layers}


@dataclass(frozen=True)
class Ranking:
    """Scores of every candidate (and, if asked, every layer), with the time each part took."""

    data: str
    examples: int
    estimators: tuple[str, ...]
    rows: tuple[RankRow, ...]
    layer_rows: tuple[RankRow, ...]
    extract_seconds: float
    score_seconds: float
    cache_hits: int
    dropped: Dropped | None = None
    """The rare classes left out of the sample (`FeatureOptions.drop_rare_classes`), if any."""

    def tiers(self, estimator: str) -> list[list[str]]:
        """Candidate names best first by `estimator`, equal scores grouped (by name within a
        group, so the order the candidates were given in never decides a tie)."""
        rows = sorted(self.rows, key=lambda r: (-r.scores[estimator], r.name))
        tiers: list[list[RankRow]] = []
        for row in rows:
            if tiers and scores_tie(tiers[-1][0].scores[estimator], row.scores[estimator]):
                tiers[-1].append(row)
            else:
                tiers.append([row])
        return [sorted(row.name for row in tier) for tier in tiers]

    def order(self, estimator: str) -> list[str]:
        """Candidate names best first by `estimator` (tied ones by name)."""
        return [name for tier in self.tiers(estimator) for name in tier]

    def to_dict(self) -> dict[str, Any]:
        """The scores, timings and what was dropped, with the order and tiers per estimator."""
        return {
            "data": self.data,
            "examples": self.examples,
            "estimators": list(self.estimators),
            "rows": [row.to_dict() for row in self.rows],
            "layer_rows": [row.to_dict() for row in self.layer_rows],
            "extract_seconds": self.extract_seconds,
            "score_seconds": self.score_seconds,
            "cache_hits": self.cache_hits,
            "dropped": None if self.dropped is None else self.dropped.to_dict(),
            "order": {name: self.order(name) for name in self.estimators},
            "tiers": {name: self.tiers(name) for name in self.estimators},
        }
